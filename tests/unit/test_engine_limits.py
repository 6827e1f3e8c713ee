"""The reference engine's KV-cache check with the free memory passed in: its CUDA branch's arithmetic
(no GPU here: torch.cuda.mem_get_info itself is not called), and the CPU branch's source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specexp import checks
from specexp.config import Config, ConfigError, DrafterConfig, ModelConfig, TrackingConfig, WorkloadConfig
from specexp.engines.torch import TorchEngineConfig

GIB = 2**30
# An 8B-like shape: 32 layers, 8 KV heads of 128 (GQA), bfloat16: per request and cached token
# 2 (k, v) x 1.5 (old and doubled cache while it grows) x 32 x 8 x 128 x 2 bytes = 196608 bytes.
SHAPE = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}


def cuda_cfg(model: Path, batch: int, drafter: DrafterConfig | None = None) -> Config:
    return Config(
        engine=TorchEngineConfig(device="cuda:0", dtype="bfloat16"),
        model=ModelConfig(name="big", path=str(model)),
        drafter=drafter or DrafterConfig(),
        workload=WorkloadConfig(input_len=3000, output_len=1000),  # 4000 tokens: a 4096-slot cache
        tracking=TrackingConfig(uri="sqlite://"),
        outputs="/tmp/specexp-test",
        batch=batch,
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(SHAPE))
    return tmp_path


def test_the_cuda_kv_cache_arithmetic_against_the_gpu_free_memory_passed_in(model) -> None:
    cfg = cuda_cfg(model, batch=64)
    assert checks.kv_cache_bytes(model, 64, 4000, "bfloat16") == 196608 * 64 * 4096 == 48 * GIB
    free = checks.Free(40 * GIB, "GPU cuda:0 has {} free")
    with pytest.raises(ConfigError) as refused:
        checks.check_reference_memory(cfg, free)
    assert str(refused.value) == (
        "batch: the reference engine's KV cache for 64 requests of 4000 tokens needs 48.0 GiB and GPU cuda:0 has "
        "40.0 GiB free. Fix: use a batch (and engine.max_running_requests) of at most 53, or shorter "
        "workload.input_len/output_len"
    )  # 64 x 40 / 48 = 53.3
    checks.check_reference_memory(cfg, checks.Free(48 * GIB, "GPU cuda:0 has {} free"))  # exactly fits
    checks.check_reference_memory(cuda_cfg(model, batch=53), free)  # the batch it names fits


def test_a_draft_model_counts_its_own_cache_on_the_gpu(model, tmp_path_factory) -> None:
    draft = tmp_path_factory.mktemp("draft")
    (draft / "config.json").write_text(json.dumps({**SHAPE, "num_hidden_layers": 4}))  # 1/8 of the target's
    cfg = cuda_cfg(model, batch=64, drafter=DrafterConfig(name="d", method="draft_model", path=str(draft), num_steps=4))
    free = checks.Free(50 * GIB, "GPU cuda:0 has {} free")  # 48 GiB + 6 GiB (its own 4096 slots) > 50
    with pytest.raises(ConfigError, match=r"of 4000 tokens needs 54\.0 GiB and GPU cuda:0 has 50\.0 GiB free"):
        checks.check_reference_memory(cfg, free)


def test_the_free_memory_source_per_device() -> None:
    cpu = checks.free_memory("cpu")
    assert cpu is not None and cpu.bytes > 0 and cpu.where == "this machine has {} available"
    import torch

    if not torch.cuda.is_available():  # here: no GPU, so the CUDA check is skipped, not guessed
        assert checks.free_memory("cuda:0") is None
    else:
        gpu = checks.free_memory("cuda:0")
        assert gpu is not None and 0 < gpu.bytes <= torch.cuda.mem_get_info(0)[1]
