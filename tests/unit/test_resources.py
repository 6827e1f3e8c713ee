"""What groups side by side take from a node: GPU slices that never overlap, a GPU request per
group for a scheduler, no fixed port shared by parallel groups."""

from __future__ import annotations

import threading

import pytest
from omegaconf import OmegaConf

from specexp.config import ConfigError
from specexp.sweep import resources
from specexp.sweep.plan import by_server, plan

SLURM = OmegaConf.create(
    {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", "gpus_per_node": None}
)
LOCAL = OmegaConf.create(
    {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", "gpus_per_node": None}
)


def test_gpus_per_server_follow_the_engine_and_the_models_parallelism(make_config) -> None:
    assert make_config("engine=torch").gpus == 0  # the reference engine on CPU
    assert make_config("engine=torch", "engine.device=cuda").gpus == 1
    assert make_config("engine=vllm_cpu", "drafter=none").gpus == 0
    assert make_config("engine=vllm", "drafter=none", "model.tp=4").gpus == 4
    assert make_config("engine=sglang", "drafter=none", "model.tp=2", "engine.dp_size=4").gpus == 8
    assert make_config("engine=torch", "engine.gpus=3").gpus == 3  # said outright
    with pytest.raises(ConfigError, match=r"engine\.gpus"):
        make_config("engine.gpus=-1")


def test_a_scheduler_is_asked_for_each_groups_gpus_or_whole_nodes() -> None:
    assert resources.gpu_request(SLURM, 2) == 2
    assert resources.gpu_request(SLURM, 0) is None  # a CPU group asks for none
    whole = OmegaConf.merge(SLURM, {"gpus_per_node": 8})
    assert resources.gpu_request(whole, 2) is None and resources.gpu_request(whole, 16) == 16
    assert resources.gpu_request(LOCAL, 2) is None  # on this node specexp deals them itself
    assert resources.same_node(LOCAL) and not resources.same_node(SLURM)


def test_groups_on_one_node_get_disjoint_slices_and_wait_for_theirs() -> None:
    pool = resources.DevicePool(["0", "1", "2", "3", "4", "5", "6", "7"])
    small, mid = pool.take(1), pool.take(2)
    assert small == ["0"] and mid == ["1", "2"]
    whole: list[str] = []
    waiting = threading.Thread(target=lambda: whole.extend(pool.take(8)))  # tp=8 takes the node
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and not whole  # waits while others hold GPUs
    pool.give(mid)
    pool.give(small)
    waiting.join(5)
    assert whole == [str(i) for i in range(8)]


def test_parallel_groups_may_not_share_a_fixed_port_nor_want_more_gpus_than_the_node(make_config) -> None:
    def groups(*overrides: str):
        jobs = [["dry_run=true", *overrides, f"drafter={d}"] for d in ("none", "tiny")]
        return by_server(plan(lambda o: make_config(*o), jobs, "s"))

    resources.check_parallel(groups(), ["0"])  # free ports, CPU servers
    with pytest.raises(ConfigError, match=r"engine\.port"):
        resources.check_parallel(groups("engine.port=8000"), None)
    resources.check_parallel(groups("engine.gpus=2"), ["0", "1"])
    with pytest.raises(ConfigError, match=r"engine\.gpus"):
        resources.check_parallel(groups("engine.gpus=2"), ["0"])
    resources.check_parallel(groups("engine.gpus=2"), None)  # a scheduler allocates: nothing to check here
