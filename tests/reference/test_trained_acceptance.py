"""The tool's truth check on model=tiny_trained: acceptance depends on what is asked (held-out code
accepts more than random ids, which this target answers with noise its drafters never learnt), and a
drafter known to be better (more TTT steps, more data) shows higher acceptance on held-out code.
Acceptance only, counted by the reference engine in-process (greedy, exact counts); timing orderings
and the per-workload table belong in benchmarks/workload_acceptance.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from specexp.models.corpus import held_out_prompts
from specexp.models.tiny_trained import TrainedPaths, ensure_tiny_trained
from specexp.reference.offline import Acceptance, measure

# Builds model=tiny_trained into the tests' outputs once (minutes on two cores), then reuses it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

K, PROMPTS, PROMPT_LEN, OUTPUT_LEN = 5, 12, 48, 48


@pytest.fixture(scope="module")
def trained(shared_outputs: Path) -> TrainedPaths:
    return ensure_tiny_trained(shared_outputs)


@pytest.fixture(scope="module")
def accept(trained: TrainedPaths):
    tok = Tokenizer.from_file(str(trained.target / "tokenizer.json"))
    gen, bos = torch.Generator().manual_seed(0), tok.token_to_id("<s>")
    workloads = {
        "code": held_out_prompts(tok, PROMPTS, PROMPT_LEN),
        # As the benchmark draws them: BOS, then ids uniform over the non-special ones.
        "random": [
            [bos, *torch.randint(2, tok.get_vocab_size(), (PROMPT_LEN - 1,), generator=gen).tolist()]
            for _ in range(PROMPTS)
        ],
    }

    @cache
    def run(workload: str, head: str) -> Acceptance:
        return measure(trained.target, workloads[workload], OUTPUT_LEN, getattr(trained, head), "eagle3", K)

    return run


def test_code_accepts_at_least_a_tenth_more_than_random_ids(accept) -> None:
    code, random = accept("code", "eagle3").rate, accept("random", "eagle3").rate
    print(f"accept rate: held-out code {code:.3f}, random ids {random:.3f}")
    assert code - random >= 0.1


def test_more_ttt_steps_accept_more_at_later_positions(accept) -> None:
    ttt5, ttt1 = accept("code", "eagle3").position_rates(), accept("code", "eagle3_ttt1").position_rates()
    print(f"per position: TTT5 {[round(r, 3) for r in ttt5]}, TTT1 {[round(r, 3) for r in ttt1]}")
    assert all(a > b for a, b in zip(ttt5[1:], ttt1[1:], strict=True))


def test_more_training_data_accepts_more(accept) -> None:
    full, small = accept("code", "eagle3"), accept("code", "eagle3_small")
    print(f"accept rate: full data {full.rate:.3f}, a quarter {small.rate:.3f}")
    assert small.rate < full.rate
