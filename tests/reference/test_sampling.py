"""The verification rule in isolation: large vectorised samples, fixed seeds."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specexp.reference import sampling
from tests.reference.client import assert_same_distribution

N = 20_000
P = torch.tensor([[0.40, 0.25, 0.15, 0.10, 0.07, 0.03], [0.05, 0.05, 0.10, 0.20, 0.25, 0.35]])
Q = torch.tensor([[0.10, 0.10, 0.40, 0.30, 0.05, 0.05], [0.30, 0.30, 0.10, 0.10, 0.10, 0.10]])


def emitted_tokens(gen: torch.Generator) -> tuple[Counter[int], Counter[int]]:
    """Run one verify step on N rows drafting 2 tokens from Q against target P (position-independent
    target, so each emitted position must follow its row of P). Returns the tokens at positions 0 and 1."""
    p = torch.cat([P, P[-1:]]).expand(N, 3, 6)
    q = Q.expand(N, 2, 6)
    draft = torch.multinomial(Q, N, replacement=True, generator=gen).T  # [N, 2]
    u = torch.rand(N, 2, generator=gen)
    exps = torch.empty(N, 3, 6).exponential_(generator=gen)
    accepted, nxt = sampling.verify(p, q, draft, torch.full((N,), 2), u, exps)
    first = torch.where(accepted > 0, draft[:, 0], nxt)
    second = torch.where(accepted > 1, draft[:, 1], nxt)[accepted > 0]
    return Counter(first.tolist()), Counter(second.tolist())


def target_samples(row: int, n: int, gen: torch.Generator) -> Counter[int]:
    return Counter(torch.multinomial(P[row], n, replacement=True, generator=gen).tolist())


def test_rejection_sampling_reproduces_the_target() -> None:
    gen = torch.Generator().manual_seed(0)
    first, second = emitted_tokens(gen)
    assert_same_distribution(first, target_samples(0, N, gen))
    assert_same_distribution(second, target_samples(1, sum(second.values()), gen))


def test_a_wrong_rule_fails_the_same_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "accept_mask", lambda p, q, u: torch.ones_like(u, dtype=torch.bool))
    gen = torch.Generator().manual_seed(0)
    first, _ = emitted_tokens(gen)
    with pytest.raises(AssertionError, match="distributions differ"):
        assert_same_distribution(first, target_samples(0, N, gen))


def test_greedy_rows_accept_exactly_the_argmax_prefix() -> None:
    logits = torch.tensor([[[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 9.0]]] * 3)
    p = sampling.Sampling([0.0] * 3, [1.0] * 3, torch.device("cpu")).probs(logits)
    draft = torch.tensor([[1, 0], [1, 2], [0, 0]])  # all right, second wrong, first wrong
    q = torch.nn.functional.one_hot(draft, 3).float()
    accepted, nxt = sampling.verify(p, q, draft, torch.tensor([2, 2, 2]), torch.ones(3, 2), torch.ones(3, 3, 3))
    assert accepted.tolist() == [2, 1, 0]
    assert nxt.tolist() == [2, 0, 1]


def test_k_eff_caps_acceptance() -> None:
    p = torch.nn.functional.one_hot(torch.tensor([[1, 1, 1]]), 3).float()
    draft = torch.tensor([[1, 1]])
    q = torch.nn.functional.one_hot(draft, 3).float()
    accepted, _ = sampling.verify(p, q, draft, torch.tensor([1]), torch.ones(1, 2), torch.ones(1, 3, 3))
    assert accepted.tolist() == [1]


def test_top_p_keeps_the_smallest_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.5, 0.3, 0.15, 0.05]]))
    pr = sampling.Sampling([1.0, 1.0], [0.75, 1.0], torch.device("cpu")).probs(logits)
    torch.testing.assert_close(pr[0], torch.tensor([0.625, 0.375, 0.0, 0.0]))
    torch.testing.assert_close(pr[1], torch.tensor([0.5, 0.3, 0.15, 0.05]))


def test_greedy_rows_stay_one_hot_in_a_sampled_batch() -> None:
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3], [0.2, 0.5, 0.3]]))
    pr = sampling.Sampling([0.0, 1.0], [1.0, 1.0], torch.device("cpu")).probs(logits)
    torch.testing.assert_close(pr, torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.5, 0.3]]))
