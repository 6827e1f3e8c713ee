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


def field_rows(help_text: str) -> dict[str, str]:
    """``key -> description`` from the help's every-field section (wrapped lines joined)."""
    section = help_text.split("== Every field a user sets", 1)[1].split("\n", 1)[1].split("\n==", 1)[0]
    rows: dict[str, str] = {}
    key = None
    for line in section.splitlines():
        if m := re.match(r"^    ([\w.]+)=(\S*)\s*(.*)$", line):
            key = m.group(1)
            rows[key] = m.group(3)
        elif key and line.startswith(" " * 44):
            rows[key] = (rows[key] + " " + line.strip()).strip()
    return rows


def test_every_field_a_user_sets_is_listed_with_its_whole_description(help_text, make_config) -> None:
    rows = field_rows(help_text)
    wanted = {"slo.ttft_ms", "slo.tpot_ms", "slo.target", "measure.windows", "measure.rel_ci", "arms", "rate"}
    wanted |= {"load.max_concurrency", "engine.url", "engine.model_name", "hydra.sweeper.objective", "batch"}
    assert wanted <= set(rows)
    assert not {"sweep_id", "run_name", "max_batch", "repeat"} & set(rows)  # set by the sweepers
    for key, text in rows.items():
        assert len(text) >= 8, f"{key} has no description"
        assert not text.endswith((",", "(", " at most", " e.g.")), f"{key}'s description is cut: {text!r}"
    cfg = OmegaConf.structured(make_config())
    for key in rows:
        if not key.startswith(("hydra.", "engine.")):
            assert OmegaConf.select(cfg, key, default=MISSING) is not MISSING, key


def test_descriptions_that_run_over_lines_are_never_cut(help_text) -> None:
    assert "whatever is in flight, as a deployment sees them." in help_text  # load=rate
    assert "(Poisson arrivals, at most 16 in flight; two server launches)." in help_text  # +sweep=rate_matrix
    assert 'e.g. ["ttft_ms_p99 <= 500"]' in help_text  # "e.g." ends no sentence


def test_every_field_is_described_in_the_words_a_user_types() -> None:
    """No constant's name ("one of WORKLOAD_KINDS"), no Python None, no pointer into the code: the
    choices themselves, null, and what the setting does (called in this process: no subprocess)."""
    import inspect

    from specexp import config, help
    from specexp.engines import ENGINES

    text = help.fields()
    assert "workload.kind=random" in text and "one of random, builtin, jsonl, sharegpt, mtbench, hf, humaneval" in text
    assert "one of closed, rate" in text
    modules = [getattr(config, m) for m in ("engine", "measure", "root", "sweeper", "workload")]
    modules += [inspect.getmodule(e.config_class) for e in ENGINES.values()]
    constants = {name for module in modules for name in vars(module) if name.isupper()}
    assert {"WORKLOAD_KINDS", "LOAD_KINDS", "DTYPES"} <= constants
    named = constants & set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", text))
    assert not named, f"--help names code constants: {sorted(named)}"
    assert "None" not in text and "(specexp." not in text
    assert "(specexp." not in help.groups()  # the options' descriptions: "The reference engine: PyTorch, ..."
    assert help.preset_description("engine", "torch").startswith("The reference engine: PyTorch")
