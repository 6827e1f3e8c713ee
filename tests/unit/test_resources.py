"""What groups side by side take from a node: GPU slices that never overlap, a GPU request per
group for a scheduler, no fixed port shared by parallel groups."""

from __future__ import annotations

import threading

import pytest
from omegaconf import OmegaConf

from specexp.config import ConfigError
from specexp.sweep import resources
from specexp.sweep.groups import Group, form_groups
from specexp.sweep.job_plan import by_server, plan

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


def group(gpus: int, gpu_type: str | None = None) -> Group:
    return Group(0, "key", gpus, gpu_type=gpu_type, sweep_id="2026-01-01_00-00-00-abc123")


def test_a_groups_job_is_named_for_its_sweep_and_asks_its_gpus_cpus_and_memory() -> None:
    name = {"name": "specexp-2026-01-01_00-00-00-abc123"}  # scancel --name stops this sweep's jobs only
    assert resources.launcher_fields(SLURM, group(4)) == name | {"gpus_per_node": 4}
    assert resources.launcher_fields(SLURM, group(0)) == name  # a CPU server asks for no GPU
    typed = resources.launcher_fields(SLURM, group(2, "h100"))
    assert typed == name | {"gres": "gpu:h100:2", "gpus_per_node": None}  # one GPU request, not two
    shares = OmegaConf.merge(SLURM, {"cpus_per_task": 10, "mem_gb": 60})  # a one-GPU server's share
    assert resources.launcher_fields(shares, group(8)) == name | {
        "gpus_per_node": 8,
        "cpus_per_task": 80,
        "mem_gb": 480,
    }
    assert resources.launcher_fields(shares, group(1)) == name | {"gpus_per_node": 1}
    assert resources.launcher_fields(shares, group(0)) == name
    nodes = OmegaConf.merge(SLURM, {"gpus_per_node": 8, "cpus_per_task": 96, "mem_gb": 1000})  # whole nodes
    assert resources.launcher_fields(nodes, group(2)) == name
    assert resources.launcher_fields(nodes, group(16)) == name | {
        "gpus_per_node": 16,
        "cpus_per_task": 192,
        "mem_gb": 2000,
    }


def test_groups_differing_only_in_gpu_type_share_no_server_and_ask_each_its_own(make_config) -> None:
    jobs = [
        ["dry_run=true", "engine.gpus=1", f"engine.gpu_type={t}", f"batch={b}"]
        for b in (1, 4)
        for t in ("a100", "h100")
    ]
    planned = plan(lambda o: make_config(*o), jobs, "s")
    assert len({j.group for j in planned}) == 2  # the server key holds the GPU type: one server each
    asked = [resources.launcher_fields(SLURM, g)["gres"] for g in form_groups(planned, 0, 0)]
    assert asked == ["gpu:a100:1", "gpu:h100:1"]  # each group's job asks its own type, its batches together


def test_the_launchers_own_gres_is_asked_untouched_with_no_second_gpu_request() -> None:
    gres = OmegaConf.merge(SLURM, {"gres": "gpu:a100:4", "cpus_per_task": 8})
    assert resources.launcher_fields(gres, group(2, "h100")) == {"name": "specexp-2026-01-01_00-00-00-abc123"}
    assert resources.gpu_request(gres, 2) is None  # no --gpus-per-node beside --gres
    assert resources.launcher_fields(LOCAL, group(2)) == {}  # on this node nothing is asked of a scheduler


def test_a_sqlite_store_under_a_cluster_launcher_is_warned_of_once(make_config, caplog, tmp_path) -> None:
    def groups(uri: str):
        jobs = [["dry_run=true", f"tracking.uri={uri}", f"batch={b}"] for b in (1, 4)]
        return by_server(plan(lambda o: make_config(*o), jobs, "s"))

    sqlite = f"sqlite:///{tmp_path}/mlflow.db"
    resources.check_parallel(groups(sqlite), ["0"])  # groups on this node share its disk: no warning
    resources.check_parallel(groups("http://mlflow:5000"), None)
    assert not caplog.records
    resources.check_parallel(groups(sqlite), None)  # a scheduler's nodes
    resources.check_parallel(groups(sqlite), None)
    (warned,) = caplog.records
    assert f"tracking.uri={sqlite} is a SQLite file" in warned.message and "tracking.uri=http://" in warned.message
