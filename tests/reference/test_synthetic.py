"""Synthetic acceptance on the reference engine: the rule as a pure function over many seeded steps,
its flag refused in one line, and one small live point measuring the acceptance length it was asked."""

from __future__ import annotations

import json

import pytest
import torch

from specexp.config.engine import synthetic_rates
from specexp.models.tiny import TinyPaths
from specexp.reference import sampling
from tests.reference.test_schedule_flags import parse

N = 50_000  # steps: the mean's standard error is under 0.01 tokens


def steps(rates: list[float], k_eff: torch.Tensor | None = None, seed: int = 0) -> torch.Tensor:
    """Accepted drafts per step over N seeded steps of a depth-len(rates) chain."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(N, len(rates), generator=gen)
    k_eff = torch.full((N,), len(rates)) if k_eff is None else k_eff
    return sampling.synthetic_accept(u, torch.tensor(sampling.conditional_rates(rates)), k_eff)


@pytest.mark.parametrize("length", [1.0, 1.7, 2.5, 3.2, 5.0])
def test_a_length_is_met_on_average(length: float) -> None:
    accepted = steps(synthetic_rates(4, None, length))
    assert abs(1 + accepted.float().mean().item() - length) < 0.02


def test_rates_are_met_per_position_and_seeded() -> None:
    rates = [0.9, 0.7, 0.4, 0.1]
    accepted = steps(rates)
    for i, rate in enumerate(rates):
        assert abs((accepted > i).float().mean().item() - rate) < 0.01  # unconditional: first i+1 all accepted
    assert torch.equal(accepted, steps(rates)) and not torch.equal(accepted, steps(rates, seed=1))


def test_a_shorter_chain_is_cut_and_the_next_token_is_the_targets() -> None:
    accepted = steps([1.0, 1.0, 1.0, 1.0], k_eff=torch.tensor([4, 2, 0]).repeat(N // 3 + 1)[:N])
    assert accepted[:3].tolist() == [4, 2, 0]
    p = torch.nn.functional.one_hot(torch.tensor([[3, 1, 2]]), 4).float()  # the target's argmax: 3, 1, 2
    draft = torch.tensor([[0, 0]])  # never the target's: the standard rule would accept nothing
    rule = torch.tensor(sampling.conditional_rates([1.0, 0.0]))
    accepted, nxt = sampling.verify(p, p[:, :2], draft, torch.tensor([2]), torch.zeros(1, 2), torch.ones(1, 3, 4), rule)
    assert (accepted.item(), nxt.item()) == (1, 1)  # the coin accepted draft 0; then the target's token


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--synthetic-acceptance-rates", "[1,0.5]"], "needs --draft-model or --speculative-method"),
        (
            ["--speculative-method", "ngram", "--num-speculative-tokens", "2", "--synthetic-acceptance-rates", "[1]"],
            "need 2",
        ),
        (
            [
                "--speculative-method",
                "ngram",
                "--num-speculative-tokens",
                "2",
                "--synthetic-acceptance-rates",
                "[0.1,0.5]",
            ],
            "non-increasing",
        ),
        (
            ["--speculative-method", "ngram", "--num-speculative-tokens", "2", "--synthetic-acceptance-rates", "x"],
            "not a JSON",
        ),
    ],
)
def test_bad_rates_exit_2_naming_the_flag(tiny: TinyPaths, extra, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(tiny, *extra)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_point_measures_the_length_it_was_asked(specexp) -> None:
    """One small live point (engine=torch, model=tiny, depth 4, batch 4): the acceptance length measured
    through the whole path (flag, server, counters, metrics) is within 5% of 2.5; the point says it."""
    run = specexp(
        "engine=torch",
        "model=tiny",
        "drafter=tiny",
        "drafter.num_steps=4",
        "drafter.synthetic_acceptance_length=2.5",
        "batch=4",
        "workload.output_len=64",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    result = json.loads((run.workdir / "run" / "results.json").read_text())
    assert abs(result["metrics"]["accept_length"] - 2.5) < 0.05 * 2.5, result["metrics"]
    assert abs(result["metrics"]["accept_rate_pos_0"] - 1.0) < 0.05 and result["metrics"]["accept_rate_pos_2"] == 0
    assert result["params"]["drafter.name"] == "tiny_synthetic2.5"
    assert result["tags"]["specexp.synthetic_acceptance"] == "1,0.5,0,0"
    assert "drafter=tiny_synthetic2.5" in run.proc.stderr  # the console's line for the point
    assert "acceptance is synthetic" in "".join(p.read_text() for p in run.workdir.rglob("*.log"))
    (child,) = run.runs()
    assert child.data.tags["specexp.synthetic_acceptance"] == "1,0.5,0,0"
