"""Run names from a sweep's jobs: the axes that vary, batch last, safe through Hydra's parser."""

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from specexp.sweep.names import axes, override, point_names


def test_axes_are_the_keys_that_vary_batch_last() -> None:
    jobs = [
        ["batch=1", "drafter=none", "nccl=pcie"],
        ["batch=16", "drafter=none", "nccl=pcie"],
        ["batch=1", "drafter=tiny", "nccl=pcie", "+drafter.num_steps=3"],
    ]
    keys = axes(jobs)
    assert keys == ["drafter", "drafter.num_steps", "batch"]
    assert point_names(jobs, keys) == [
        "drafter=none batch=1",
        "drafter=none batch=16",
        "drafter=tiny drafter.num_steps=3 batch=1",
    ]


def test_a_single_job_has_no_axes() -> None:
    assert point_names([["batch=4"]], axes([["batch=4"]])) == [""]


def test_names_survive_hydras_override_parser() -> None:
    parser = OverridesParser.create()
    for name in ["drafter=tiny batch=16", "model.path=/a,b/c's ${oc.env:HOME}", "trial 3: drafter.num_steps=2"]:
        value = parser.parse_override(override("run_name", name)).value()
        assert OmegaConf.create({"run_name": value}).run_name == name


def test_the_parent_lists_swept_values_exactly_and_its_name_shortens_them(make_config) -> None:
    from specexp.sweep.names import sweep_name, sweep_params, swept

    jobs = [[f"drafter={d}", f"batch={b}"] for d in ("none", "tiny") for b in (1, 4, 8, 16)]
    what = swept(jobs)
    assert what == {"drafter": "none,tiny", "batch": "1,4,8,16"}
    assert sweep_params(make_config(), what)["swept.batch"] == "1,4,8,16"
    assert sweep_name(make_config(), what) == "torch/tiny: drafter none,tiny × batch 1–16"
