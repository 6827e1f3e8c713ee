"""conf/ and sweeps/ ship inside the wheel: specexp composes and sweeps from an installed wheel."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, unpacked into a folder that shadows the checkout."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True,
    )
    wheel = next(dist.glob("specexp-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "specexp/_conf/config.yaml" in names and "specexp/_sweeps/batch_matrix.yaml" in names
    assert "hydra_plugins/specexp_sweepers/__init__.py" in names
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True
    )
    return target


def run(target: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_config_comes_from_the_wheel(installed, tmp_path) -> None:
    out = run(installed, tmp_path, "-c", "import specexp.configstore as c; print(c.CONF_DIR, c.SWEEPS_DIR)")
    assert out.returncode == 0, out.stderr
    conf, sweeps = out.stdout.split()
    assert conf == str(installed / "specexp" / "_conf") and sweeps == str(installed / "specexp" / "_sweeps")


def test_a_preset_sweep_runs_from_the_wheel(installed, tmp_path) -> None:
    out = run(installed, tmp_path, "-m", "specexp", "+sweep=batch_matrix", "dry_run=true", "-m")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "dry run: 10 points on 2 server(s)" in out.stdout
