"""With ``hydra/launcher=submitit_slurm`` each server group's job asks SLURM for its server's GPUs
(the launcher's gpus_per_node, which submitit writes into the sbatch script): no cluster needed to
see what would be asked."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import setup_globals
from hydra.types import HydraContext

from hydra_plugins.specexp_sweepers import SpecexpSweeper
from specexp.app import task
from specexp.configstore import CONF_DIR
from specexp.sweep.groups import form_groups


def test_each_groups_job_asks_slurm_for_its_servers_gpus(tmp_path) -> None:
    setup_globals()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        config = compose(
            "config",
            overrides=["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", f"hydra.sweep.dir={tmp_path}"],
            return_hydra_config=True,
        )
        sweeper = SpecexpSweeper()
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks())
        sweeper.setup(hydra_context=context, task_function=task, config=config)
        jobs = [
            ["dry_run=true", "engine=vllm", "drafter=none", "model.tp=4"],
            ["dry_run=true", "engine=sglang", "drafter=none", "model.tp=2", "engine.dp_size=4"],
            ["dry_run=true", "engine=torch", "drafter=none"],
        ]
        groups = form_groups(sweeper.plan(jobs, "s"), 0, 0)
        asked = [sweeper.launcher_for(g.gpus).params.get("gpus_per_node") for g in groups]
    assert asked == [4, 8, None]  # a CPU server asks for no GPU
    assert sweeper.launcher_for(4).params["partition"] == "gpu"  # everything else as configured
