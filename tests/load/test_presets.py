"""The workload presets, and the truth guard: a real model's presets measure on a chat dataset."""

import json
from pathlib import Path

import pytest

from specexp.config import ConfigError
from specexp.config import workload as config


@pytest.fixture
def sharegpt(tmp_path: Path) -> Path:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]))
    return path


@pytest.mark.parametrize("preset", ["model=kimi_k25", "drafter=ttt5", "drafter=eagle3_10k"])
def test_real_model_presets_default_to_a_chat_dataset(make_config, monkeypatch, sharegpt: Path, preset: str) -> None:
    monkeypatch.delenv("SPECEXP_SHAREGPT", raising=False)
    if packaged := config.packaged_sharegpt():  # specexp[sharegpt]: the canonical file, no variable
        assert packaged.endswith("ShareGPT_V3_unfiltered_cleaned_split.json")
        assert make_config("engine=sglang", "drafter=ttt5", preset).workload.path == packaged
    monkeypatch.setattr(config, "packaged_sharegpt", lambda: None)  # without the extra
    with pytest.raises(ConfigError, match=r"\$SPECEXP_SHAREGPT, which is not set") as err:
        make_config("engine=sglang", preset)
    assert err.value.key == "workload.path" and "export SPECEXP_SHAREGPT=" in str(err.value)
    assert "pip install 'specexp[sharegpt]'" in str(err.value)
    monkeypatch.setenv("SPECEXP_SHAREGPT", str(sharegpt))
    cfg = make_config("engine=sglang", "drafter=ttt5", preset)
    assert (cfg.workload.kind, cfg.workload.api, cfg.workload.path) == ("sharegpt", "chat", str(sharegpt))
    assert not cfg.workload.synthetic and not cfg.workload.ignore_eos  # natural lengths
    explicit = make_config("engine=sglang", "drafter=ttt5", preset, "workload=random")  # the command line wins
    assert explicit.workload.synthetic


def test_dataset_presets_compose(make_config, monkeypatch, sharegpt: Path, tmp_path: Path) -> None:
    question = tmp_path / "question.jsonl"
    question.write_text(json.dumps({"turns": ["a", "b"], "category": "writing"}) + "\n")
    monkeypatch.setenv("SPECEXP_MTBENCH", str(question))
    assert make_config("workload=mtbench").workload.path == str(question)
    assert make_config("workload=humaneval").workload.api == "chat"
    assert make_config("workload=hf", f"workload.path={sharegpt}").workload.kind == "hf"
    assert make_config("workload=sharegpt", f"workload.path={sharegpt}").workload.turns == 1


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["workload.api=chat"], "workload.api"),  # random ids are no text
        (["workload=builtin", "workload.api=rest"], "workload.api"),
        (["workload=hf"], "workload.path"),  # neither a path nor a dataset
        (["workload=humaneval", "workload.prompt_format=no field"], "workload.prompt_format"),
        (["workload=humaneval", "workload.turns=0"], "workload.turns"),
        (["workload=builtin", "workload.kind=csv"], "workload.kind"),
    ],
)
def test_bad_workloads_name_their_key(make_config, overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_config(*overrides)
    assert err.value.key == key
