"""SGLang adapter: config checks, argv, version rules, and SGLang's own parser over every argv.

The ``sglang``-marked tests run SGLang 0.5.23's ServerArgs parser in the light venv
(scripts/install_sglang_light.sh) and skip when it is absent.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from specexp.config import (
    Config,
    ConfigError,
    DrafterConfig,
    ModelConfig,
    NcclConfig,
    TrackingConfig,
    WorkloadConfig,
)
from specexp.context import Launch, RunContext
from specexp.engines.sglang import SglangEngine, SglangEngineConfig, adapter, argcheck, versions
from tests.conftest import needs

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
LIGHT_PYTHON = Path(os.environ.get("SPECEXP_SGLANG_VENV", ROOT / ".venvs" / "sglang")) / "bin" / "python"
needs_sglang = needs(LIGHT_PYTHON, "light SGLang venv", "run bash scripts/install_sglang_light.sh")
ENGINE = SglangEngine()
PORT = 30000


def preset(group: str, name: str, schema: type) -> Any:
    """A shipped conf/<group>/<name>.yaml composed onto its schema, as Hydra would (env defaults)."""
    node = OmegaConf.load(CONF / group / f"{name}.yaml")
    node.pop("defaults")
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), node))


def make_config(
    drafter: DrafterConfig | None = None,
    decode: int = 1,
    nccl: NcclConfig | None = None,
    batch: int = 1,
    python: str | None = None,
    model: ModelConfig | None = None,
    **engine: Any,
) -> Config:
    return Config(
        engine=SglangEngineConfig(python=python, **engine),
        model=model or preset("model", "kimi_k25", ModelConfig),
        drafter=drafter or DrafterConfig(),
        decode=decode,
        nccl=nccl or NcclConfig(),
        workload=WorkloadConfig(),
        tracking=TrackingConfig(uri="sqlite:///unused.db"),
        outputs="outputs",
        batch=batch,
    )


def eagle3(steps: int = 3, topk: int = 1, tokens: int | None = 4, method: str = "eagle3") -> DrafterConfig:
    path = None if method in ("mtp", "ngram") else "/ckpt/draft"
    return DrafterConfig(
        name=method, method=method, path=path, target="kimi_k25", num_steps=steps, topk=topk, num_draft_tokens=tokens
    )


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    """Pretend engine.python has a given SGLang, without running the probe."""

    def use(version: str | None, readers: tuple[str, ...] = ()) -> None:
        found = versions.Installed(version, readers) if version else None
        monkeypatch.setattr(adapter, "probe", lambda python: found)

    return use


# --- shipped presets --------------------------------------------------------------------------


def test_presets_compose_onto_their_schemas():
    model = preset("model", "kimi_k25", ModelConfig)
    assert (model.name, model.tp, model.trust_remote_code) == ("kimi_k25", 8, True)
    assert model.path == os.environ.get("SPECEXP_KIMI_K25_PATH", "moonshotai/Kimi-K2.5")
    for name in ("ttt5", "eagle3_10k"):
        d = preset("drafter", name, DrafterConfig)
        assert (d.name, d.method, d.target, d.draft_tokens) == (name, "eagle3", "kimi_k25", 4)
        assert d.path
    assert preset("nccl", "pcie", NcclConfig).env["NCCL_IB_DISABLE"] == "1"
    engine = preset("engine", "sglang", SglangEngineConfig)
    assert engine.enable_metrics and engine.cuda_graph_max_bs is None


# --- argv ---------------------------------------------------------------------------------------


def test_command_carries_capacity_graph_limit_speculation_and_decode_steps(installed):
    installed("0.5.23")
    cfg = make_config(drafter=preset("drafter", "ttt5", DrafterConfig), decode=4, batch=4)
    cmd = ENGINE.command(cfg, PORT, Launch.of(cfg, RunContext(max_batch=16)))  # the sweep's largest batch
    argv = cmd.argv
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert flag(argv, "--max-running-requests") == "16"
    assert flag(argv, "--cuda-graph-max-bs-decode") == "16"
    assert "--cuda-graph-max-bs" not in argv
    assert flag(argv, "--num-continuous-decode-steps") == "4"
    assert flag(argv, "--speculative-algorithm") == "EAGLE3"
    assert [flag(argv, f) for f in ("--speculative-num-steps", "--speculative-eagle-topk")] == ["3", "1"]
    assert flag(argv, "--speculative-num-draft-tokens") == "4"
    assert flag(argv, "--tp-size") == "8" and "--trust-remote-code" in argv and "--enable-metrics" in argv
    assert flag(argv, "--served-model-name") == "kimi_k25" and flag(argv, "--port") == str(PORT)


def test_launcher_prefix_and_interpreter(installed):
    installed("0.5.23")
    cfg = make_config(python="/venv/bin/python", launcher=["srun", "-N1"])
    assert ENGINE.command(cfg, PORT).argv[:5] == ["srun", "-N1", "/venv/bin/python", "-m", "sglang.launch_server"]


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.5.9", "--cuda-graph-max-bs"), ("0.5.13", "--cuda-graph-max-bs"), ("0.5.14", "--cuda-graph-max-bs-decode")],
)
def test_cuda_graph_flag_by_version(installed, version, expected):
    installed(version)
    argv = ENGINE.command(make_config(batch=8, cuda_graph_max_bs=32), PORT).argv
    assert flag(argv, expected) == "32"


def test_unknown_install_assumes_the_pinned_version(installed):
    installed(None)
    assert ENGINE.installed_version(make_config()) is None
    assert "--cuda-graph-max-bs-decode" in ENGINE.command(make_config(), PORT).argv


def test_no_speculation_flags_without_a_drafter(installed):
    installed("0.5.23")
    argv = ENGINE.command(make_config(), PORT).argv
    assert not [a for a in argv if a.startswith("--speculative")]
    assert ENGINE.request_fields(make_config()) == {}


def test_method_mapping(installed):
    installed("0.5.23")
    for method, algorithm in adapter.ALGORITHMS.items():
        argv = ENGINE.command(make_config(drafter=eagle3(method=method)), PORT).argv
        assert flag(argv, "--speculative-algorithm") == algorithm
        assert ("--speculative-draft-model-path" in argv) == (method not in ("mtp", "ngram"))


def test_env_is_nccl_then_engine_env():
    cfg = make_config(nccl=preset("nccl", "pcie", NcclConfig), env={"HF_HUB_OFFLINE": "1"})
    env = ENGINE.command(cfg, PORT).env
    assert env["NCCL_P2P_LEVEL"] == "PXB" and env["HF_HUB_OFFLINE"] == "1"


# --- config rejections --------------------------------------------------------------------------


def test_tree_too_large_is_rejected():
    with pytest.raises(ConfigError, match=r"drafter\.num_draft_tokens"):
        eagle3(steps=2, topk=2, tokens=6)


def test_unknown_method_is_rejected():
    with pytest.raises(ConfigError, match=r"drafter\.method"):
        eagle3(method="medusa")


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"cuda_graph_max_bs": 4, "batch": 8}, "engine.cuda_graph_max_bs"),
        ({"ep_size": 3}, "engine.ep_size"),
        ({"extra_args": ["--max-running-requests=64"]}, "engine.extra_args"),
        ({"extra_args": ["--speculative-num-steps", "5"]}, "engine.extra_args"),
        ({"drafter": eagle3(steps=2, topk=2, tokens=4), "attention_backend": "trtllm_mha"}, "drafter.topk"),
        ({"mem_fraction_static": 1.5}, "engine.mem_fraction_static"),
        ({"dp_size": 0}, "engine.dp_size"),
    ],
)
def test_engine_rejections_name_the_key(kwargs, key):
    with pytest.raises(ConfigError) as err:
        make_config(**kwargs)
    assert err.value.key == key


# --- version facts: notes and tags --------------------------------------------------------------


def test_ignored_decode_steps_are_tagged_and_noted(installed):
    installed("0.5.23")
    cfg = make_config(decode=4)
    assert ENGINE.tags(cfg)["specexp.decode_steps_ignored"] == "true"
    assert any("decode=4" in n for n in ENGINE.notes(cfg, adapter.probe(())))
    assert "specexp.decode_steps_ignored" not in ENGINE.tags(make_config(decode=1))


def test_honoured_decode_steps_are_not_tagged(installed):
    installed("0.3.5", ("srt/managers/scheduler.py",))
    assert "specexp.decode_steps_ignored" not in ENGINE.tags(make_config(decode=4))


def test_topk1_rewrite_of_draft_tokens_is_noted(installed):
    installed("0.5.23")
    cfg = make_config(drafter=eagle3(steps=3, topk=1, tokens=3))
    notes = ENGINE.notes(cfg, adapter.probe(()))
    assert any("num_draft_tokens=3 becomes 4" in n for n in notes)
    assert flag(ENGINE.command(cfg, PORT).argv, "--speculative-num-draft-tokens") == "4"


@pytest.mark.parametrize(
    ("version", "extra", "expected"),
    [
        ("0.5.4", [], {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "4"}),
        ("0.5.23", [], {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}),
        (
            "0.5.23",
            ["--enable-symm-mem"],
            {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "8"},
        ),
    ],
)
def test_env_overwrites_by_version(version, extra, expected):
    env = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    got = versions.overwritten_env(versions.release(version), env, extra)
    assert got == {k: v for k, v in expected.items() if env[k] != v}


def test_env_overwrite_tag(installed):
    installed("0.5.23")
    cfg = make_config(nccl=NcclConfig(name="x", env={"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_CUMEM_ENABLE": "0"}))
    assert ENGINE.tags(cfg)["specexp.sglang_env_overwritten"] == "CUDA_DEVICE_MAX_CONNECTIONS=8"


@pytest.mark.parametrize(
    ("version", "env", "overlap", "source"),
    [("0.5.9", {}, "false", "none"), ("0.5.9", {"SGLANG_ENABLE_SPEC_V2": "True"}, "true", "none"),
     ("0.5.13", {}, "true", "metrics"), ("0.5.23", {}, "true", "sglext")],
)  # fmt: skip
def test_overlap_and_acceptance_source_by_version(installed, version, env, overlap, source):
    installed(version)
    tags = ENGINE.tags(make_config(drafter=eagle3(), env=env))
    assert (tags["specexp.sglang_overlap"], tags["specexp.acceptance_source"]) == (overlap, source)


def test_preflight_without_sglang_is_one_clear_error(installed):
    installed(None)
    cfg = make_config(python="/nonexistent/bin/python")
    with pytest.raises(ConfigError, match=r"install_sglang_light\.sh") as err:
        ENGINE.preflight(cfg, ENGINE.command(cfg, PORT))
    assert err.value.key == "engine.python"


def test_probe_without_sglang_returns_none():
    assert versions.probe((sys.executable,)) is None
    assert versions.probe(("/nonexistent/python",)) is None


# --- SGLang's own parser (light venv) -----------------------------------------------------------


def matrix() -> list[tuple[Config, Launch]]:
    """Shipped presets, then drafter x depth x decode x nccl x batch settings."""
    kimi = preset("model", "kimi_k25", ModelConfig)
    pcie = preset("nccl", "pcie", NcclConfig)
    shipped = [
        make_config(
            drafter=preset("drafter", name, DrafterConfig), decode=4, nccl=pcie, batch=b, python=str(LIGHT_PYTHON)
        )
        for name in ("ttt5", "eagle3_10k")
        for b in (1, 16)
    ]
    configs = [(cfg, Launch.of(cfg)) for cfg in shipped]
    drafters = [DrafterConfig()] + [
        eagle3(method=m, steps=s, topk=k, tokens=t)
        for m in ("eagle3", "eagle", "mtp", "standalone", "draft_model")
        for s, k, t in ((1, 1, None), (3, 1, 4), (5, 4, 8), (2, 8, 17))
    ] + [eagle3(method="ngram", steps=s, tokens=None) for s in (3, 7)]  # fmt: skip
    engines = [{}, {"dp_size": 2, "ep_size": 8, "mem_fraction_static": 0.85, "attention_backend": "fa3"}]
    for drafter, decode, nccl, (batch, max_batch), engine in itertools.product(
        drafters, (1, 4), (NcclConfig(), pcie), ((1, None), (8, 64)), engines
    ):
        model = (
            kimi if not engine else ModelConfig(name="kimi_k25", path="/m", tp=8, tokenizer="/tok", max_model_len=8192)
        )
        cfg = make_config(drafter, decode, nccl, batch, python=str(LIGHT_PYTHON), model=model, **engine)
        configs.append((cfg, Launch.of(cfg, RunContext(max_batch=max_batch))))
    return configs


@pytest.mark.sglang
@needs_sglang
def test_sglang_parser_accepts_every_generated_argv():
    argvs = [
        list(argv) for argv in dict.fromkeys(tuple(ENGINE.server_args(cfg, PORT, launch)) for cfg, launch in matrix())
    ]
    verdicts = argcheck.check_argv([str(LIGHT_PYTHON)], argvs)
    rejected = [(argv, v) for argv, v in zip(argvs, verdicts, strict=True) if v is not None]
    assert not rejected, rejected[:3]
    assert len(argvs) > 150


@pytest.mark.sglang
@needs_sglang
def test_sglang_parser_rejects_what_sglang_does():
    base = ENGINE.server_args(make_config(python=str(LIGHT_PYTHON)), PORT)
    verdicts = argcheck.check_argv(
        [str(LIGHT_PYTHON)],
        [
            [*base, "--speculative-algorithm", "BOGUS"],
            [*base, "--cuda-graph-max-bs", "8"],  # ambiguous in 0.5.20+
            [*base, "--no-such-flag"],
        ],
    )
    assert "BOGUS" in verdicts[0]
    assert "ambiguous option" in verdicts[1]
    assert "unrecognized arguments" in verdicts[2]


@pytest.mark.sglang
@needs_sglang
def test_probe_and_preflight_against_the_light_venv():
    versions.probe.cache_clear()
    cfg = make_config(drafter=preset("drafter", "ttt5", DrafterConfig), decode=4, python=str(LIGHT_PYTHON))
    assert ENGINE.installed_version(cfg) == versions.PINNED_VERSION
    assert ENGINE.installed(cfg).decode_steps_readers == ()
    notes = ENGINE.preflight(cfg, ENGINE.command(cfg, PORT))
    assert any("--num-continuous-decode-steps" in n for n in notes)
    bad = make_config(python=str(LIGHT_PYTHON), extra_args=["--no-such-flag"])
    with pytest.raises(ConfigError, match="rejects the launch command"):
        ENGINE.preflight(bad, ENGINE.command(bad, PORT))


# --- a depth schedule -----------------------------------------------------------------------------


def scheduled(method: str = "eagle3") -> DrafterConfig:
    return DrafterConfig(
        name=method, method=method, path="/ckpt/draft", target="kimi_k25", schedule=[[1, 4, 5], [5, 16, 2]]
    )


def test_a_schedule_renders_as_sglangs_adaptive_config(installed, tmp_path):
    installed("0.5.23")
    cfg = make_config(drafter=scheduled(), batch=16)
    cfg.outputs = str(tmp_path)
    argv = ENGINE.command(cfg, PORT).argv
    assert "--speculative-adaptive" in argv
    assert [flag(argv, f) for f in ("--speculative-num-steps", "--speculative-num-draft-tokens")] == ["5", "6"]
    path = Path(flag(argv, "--speculative-adaptive-config"))
    assert path.parent == tmp_path / "schedules"
    assert json.loads(path.read_text()) == {"1": {"candidate_steps": [5]}, "5": {"candidate_steps": [2]}}
    assert ENGINE.command(cfg, PORT).argv == argv  # named by content: the same file each launch


@pytest.mark.parametrize(("method", "engine"), [("standalone", {}), ("eagle3", {"dp_size": 2})])
def test_a_schedule_sglang_would_ignore_is_refused(method, engine):
    with pytest.raises(ConfigError) as err:
        make_config(drafter=scheduled(method), batch=16, **engine)
    assert err.value.key == "drafter.schedule"


@pytest.mark.sglang
@needs_sglang
def test_sglang_parser_accepts_a_schedule(tmp_path):
    cfg = make_config(drafter=scheduled(), batch=16, python=str(LIGHT_PYTHON))
    cfg.outputs = str(tmp_path)
    argv = ENGINE.server_args(cfg, PORT)
    at = argv.index("--speculative-num-steps") + 1
    broken = [*argv[:at], "3", *argv[at + 1 :]]  # a depth the adaptive file does not list
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    unreadable = [*argv, "--speculative-adaptive-config", str(empty)]  # the last copy wins in argparse
    ok, wrong_depth, no_buckets = argcheck.check_argv([str(LIGHT_PYTHON)], [argv, broken, unreadable])
    assert ok is None
    assert "is not in the adaptive config candidate_steps [2, 5]" in wrong_depth
    assert "must contain at least one integer-string" in no_buckets


# --- the tree preset (sweeps/tune_tree.yaml) ------------------------------------------------------


def tree_preset_draws(samples: int = 96) -> tuple[list[DrafterConfig], int]:
    """Configurations drawn from the tree preset's search space (conditions obeyed, a fixed seed) on
    the ttt5 drafter: those specexp's checks accept, and how many they refuse (pruned, never launched)."""
    import dataclasses

    import optuna

    from specexp.sweep.space import SearchSpace

    sweeper = OmegaConf.load(ROOT / "sweeps" / "tune_tree.yaml").hydra.sweeper
    space = SearchSpace.parse(dict(sweeper.params), dict(sweeper.conditions))
    assert set(space.distributions) == {"drafter.num_steps", "drafter.topk", "drafter.num_draft_tokens"}
    ttt5 = preset("drafter", "ttt5", DrafterConfig)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    accepted, refused = [], 0
    for _ in range(samples):
        trial = study.ask()
        values = space.suggest(trial)
        study.tell(trial, 0.0)
        try:
            accepted.append(dataclasses.replace(ttt5, **{k.removeprefix("drafter."): v for k, v in values.items()}))
        except ConfigError as exc:
            assert exc.key == "drafter.num_draft_tokens"  # only a width past the tree's size is refused
            refused += 1
    return accepted, refused


def test_the_tree_preset_searches_depth_branching_and_width(installed):
    installed("0.5.23")
    accepted, refused = tree_preset_draws()
    assert refused < len(accepted) / 2  # most draws launch
    trees = [d for d in accepted if d.topk > 1]
    assert {d.topk for d in trees} == {2, 4, 8} and any(d.topk == 1 for d in accepted)
    assert len({(d.num_steps, d.topk, d.draft_tokens) for d in trees}) > 15
    for d in trees:
        argv = ENGINE.command(make_config(drafter=d, batch=4), PORT).argv
        flags = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
        assert [flag(argv, f) for f in flags] == [str(d.num_steps), str(d.topk), str(d.draft_tokens)]


@pytest.mark.sglang
@needs_sglang
def test_sglang_parser_accepts_every_configuration_the_tree_preset_launches():
    accepted, _ = tree_preset_draws()
    argvs = [
        list(argv)
        for argv in dict.fromkeys(
            tuple(ENGINE.server_args(make_config(drafter=d, batch=b, python=str(LIGHT_PYTHON)), PORT))
            for d in accepted
            for b in (1, 16)
        )
    ]
    verdicts = argcheck.check_argv([str(LIGHT_PYTHON)], argvs)
    rejected = [(argv, v) for argv, v in zip(argvs, verdicts, strict=True) if v is not None]
    assert not rejected, rejected[:3]
    assert len(argvs) > 30
