"""+sweep=required_acceptance plans its arms: the real drafter, each synthetic length and drafter=none
(baseline=auto) at every batch, all taking turns; a length outside [1, K+1] stops it before any server."""

from __future__ import annotations

SWEEP = ("+sweep=required_acceptance", "engine=torch", "model=tiny", "drafter=tiny", "dry_run=true", "-m")


def test_the_preset_plans_every_arm_taking_turns(specexp_main) -> None:
    run = specexp_main(*SWEEP, "hydra.sweeper.params.batch=4")  # one batch: 8 points, not 24 to compose
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    out = run.proc.stdout + run.proc.stderr
    assert "dry run: 8 points on 8 server(s); nothing is started" in out
    assert "arms: 8 servers up at once, taking turns at each load" in out
    assert "--synthetic-acceptance-rates '[1.0, 0.5, 0.0, 0.0]'" not in out  # 2.5 is not on the default axis
    assert "--synthetic-acceptance-rates '[1.0, 1.0, 0.0, 0.0]'" in out  # length 3


def test_a_length_beyond_the_depth_stops_the_sweep(specexp_main) -> None:
    run = specexp_main(*SWEEP, "drafter.num_steps=2")  # lengths up to 5 need depth 4
    assert run.proc.returncode == 2
    assert "drafter.synthetic_acceptance_length: 4.0 is outside [1, 3] for depth 2" in run.proc.stderr
