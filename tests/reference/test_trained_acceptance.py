"""The tool's truth check on model=tiny_trained: acceptance depends on what is asked (held-out code
accepts more than random ids, which this target answers with noise its drafters never learnt), and a
drafter known to be better (more TTT steps, more data) shows higher acceptance on held-out code.
Acceptance only, counted by the reference engine in-process (greedy, exact counts); timing orderings
and the per-workload table belong in benchmarks/workload_acceptance.py.

The first two hold for every build the README's table names (``TrainedRecipe.seed`` 0, 1 and 2); the
third only for the built seed (0): on seeds 1 and 2 the quarter-data head accepts about as much as the
full one (README). Seed 0 is model=tiny_trained itself; each other seed is a build of its own, about
5 min of CPU the first time (then reused from the tests' outputs), so it runs when SPECEXP_TRAINED_SEEDS
names it (``SPECEXP_TRAINED_SEEDS=0,1,2``)."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from specexp.models.corpus import held_out_prompts
from specexp.models.tiny_trained import TrainedPaths, TrainedRecipe, ensure_tiny_trained
from specexp.reference.offline import Acceptance, measure

# Builds model=tiny_trained into the tests' outputs once (minutes on two cores), then reuses it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

K, PROMPTS, PROMPT_LEN, OUTPUT_LEN = 5, 12, 48, 48
CHOSEN = {int(s) for s in os.environ.get("SPECEXP_TRAINED_SEEDS", "0").split(",") if s.strip()}
SEEDS = [
    pytest.param(
        seed,
        id=f"seed{seed}",
        marks=pytest.mark.skipif(
            seed not in CHOSEN,
            reason=f"seed {seed}: a build of its own (about 5 min of CPU); SPECEXP_TRAINED_SEEDS=0,1,2",
        ),
    )
    for seed in (0, 1, 2)
]


def build(outputs: Path, seed: int) -> TrainedPaths:
    """The README's build of ``seed``: model=tiny_trained itself for 0, else its own outputs folder."""
    if seed == 0:
        return ensure_tiny_trained(outputs)
    return ensure_tiny_trained(outputs / "seeds" / str(seed), replace(TrainedRecipe(), seed=seed))


@pytest.fixture(scope="module")
def accept(shared_outputs: Path):
    """``accept(seed, workload, head)``: the head's acceptance on the build of ``seed``, measured once."""

    @cache
    def workloads(seed: int) -> tuple[TrainedPaths, dict[str, list[list[int]]]]:
        trained = build(shared_outputs, seed)
        tok = Tokenizer.from_file(str(trained.target / "tokenizer.json"))
        gen, bos = torch.Generator().manual_seed(0), tok.token_to_id("<s>")
        return trained, {
            "code": held_out_prompts(tok, PROMPTS, PROMPT_LEN),
            # As the benchmark draws them: BOS, then ids uniform over the non-special ones.
            "random": [
                [bos, *torch.randint(2, tok.get_vocab_size(), (PROMPT_LEN - 1,), generator=gen).tolist()]
                for _ in range(PROMPTS)
            ],
        }

    @cache
    def run(seed: int, workload: str, head: str) -> Acceptance:
        trained, prompts = workloads(seed)
        return measure(trained.target, prompts[workload], OUTPUT_LEN, getattr(trained, head), "eagle3", K)

    return run


@pytest.mark.parametrize("seed", SEEDS)
def test_code_accepts_at_least_a_tenth_more_than_random_ids(accept, seed: int) -> None:
    code, random = accept(seed, "code", "eagle3").rate, accept(seed, "random", "eagle3").rate
    print(f"seed {seed}: accept rate: held-out code {code:.3f}, random ids {random:.3f}")
    assert code - random >= 0.1


@pytest.mark.parametrize("seed", SEEDS)
def test_more_ttt_steps_accept_more_at_later_positions(accept, seed: int) -> None:
    ttt5, ttt1 = accept(seed, "code", "eagle3").position_rates(), accept(seed, "code", "eagle3_ttt1").position_rates()
    print(f"seed {seed}: per position: TTT5 {[round(r, 3) for r in ttt5]}, TTT1 {[round(r, 3) for r in ttt1]}")
    assert all(a > b for a, b in zip(ttt5[1:], ttt1[1:], strict=True))


def test_more_training_data_accepts_more(accept) -> None:
    full, small = accept(0, "code", "eagle3"), accept(0, "code", "eagle3_small")
    print(f"accept rate: full data {full.rate:.3f}, a quarter {small.rate:.3f}")
    assert small.rate < full.rate
