"""The tool's truth check on model=tiny_trained: a drafter known to be better (more TTT steps, more
data) shows higher acceptance on held-out code. Acceptance only, counted by the reference engine
in-process (greedy, exact counts); timing orderings and the per-workload table belong in
benchmarks/workload_acceptance.py. (Acceptance on code vs random ids is not checked: this target
answers random ids with the code it writes anyway, and its heads accept that at least as well as
held-out code; see the benchmark's interval.)"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
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
    workloads = {
        "code": held_out_prompts(tok, PROMPTS, PROMPT_LEN),
    }

    @cache
    def run(workload: str, head: str) -> Acceptance:
        return measure(trained.target, workloads[workload], OUTPUT_LEN, getattr(trained, head), "eagle3", K)

    return run


def test_more_ttt_steps_accept_more_at_later_positions(accept) -> None:
    ttt5, ttt1 = accept("code", "eagle3").position_rates(), accept("code", "eagle3_ttt1").position_rates()
    print(f"per position: TTT5 {[round(r, 3) for r in ttt5]}, TTT1 {[round(r, 3) for r in ttt1]}")
    assert all(a > b for a, b in zip(ttt5[1:], ttt1[1:], strict=True))


def test_more_training_data_accepts_more(accept) -> None:
    full, small = accept("code", "eagle3"), accept("code", "eagle3_small")
    print(f"accept rate: full data {full.rate:.3f}, a quarter {small.rate:.3f}")
    assert small.rate < full.rate
