"""``python -m specexp --help``: specexp's own page, with every group option and preset described."""

import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from specexp.configstore import CONF_DIR, SWEEPS_DIR
from tests.conftest import REPO

MISSING = object()


@pytest.fixture(scope="module")
def help_text() -> str:
    proc = subprocess.run([sys.executable, "-m", "specexp", "--help"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_option_and_preset_is_listed_with_a_description(help_text) -> None:
    assert "_schema" not in help_text and "Powered by Hydra" not in help_text
    for path in [*CONF_DIR.glob("*/*.yaml"), *SWEEPS_DIR.glob("*.yaml")]:
        if path.parent.name == "hydra" or path.parent.parent.name == "hydra":
            continue
        name = f"+sweep={path.stem}" if path.parent == SWEEPS_DIR else path.stem
        line = next((ln for ln in help_text.splitlines() if re.search(rf"[ *]{re.escape(name)}\s", ln)), None)
        assert line is not None, name
        assert len(line.split(name, 1)[1].strip()) > 10, f"{name} has no description: {line!r}"
    assert re.search(r"^\s+\*tiny\s", help_text, re.M)  # the option in use is marked


def test_fields_named_in_the_help_exist(help_text, make_config) -> None:
    section = help_text.split("== Fields users change most", 1)[1].split("\n", 1)[1].split("\n==", 1)[0]
    keys = re.findall(r"^  ([\w.]+)=", section, re.M)
    assert {"batch", "decode", "baseline", "drafter.num_steps", "tracking.uri"} <= set(keys)
    cfg = OmegaConf.structured(make_config())
    for key in keys:
        assert OmegaConf.select(cfg, key, default=MISSING) is not MISSING, key


def test_three_examples(help_text) -> None:
    examples = help_text.split("== Examples ==", 1)[1]
    assert len(re.findall(r"^\s+python -m specexp", examples, re.M)) == 3
