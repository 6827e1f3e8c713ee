"""Sampling and speculative verification, vectorised over the batch.

Greedy rows are expressed as one-hot distributions with fixed noise (u = 1, exponentials = 1), so one
rule serves both: accepting x when ``u * q(x) <= p(x)`` reduces to "x is the target's argmax", and the
residual ``max(0, p - q)`` of a rejected one-hot draft is the target's argmax. Randomness comes in as
tensors drawn from each request's own generator, which keeps seeded requests reproducible and lets
tests feed any noise they like.
"""

from __future__ import annotations

import torch


class Sampling:
    """The batch's per-row sampling parameters as tensors, built once per step.

    What the rows have in common (all greedy, some greedy, some top-p) is known here from the
    request parameters, so ``probs`` never reads a device tensor back to decide a branch: on a GPU
    each such read is a sync, and ``probs`` runs k + 1 times per speculative step.
    """

    def __init__(self, temperature: list[float], top_p: list[float], device: torch.device) -> None:
        self.temperature, self.top_p = torch.tensor([temperature, top_p], device=device)
        self.all_greedy = all(t == 0 for t in temperature)
        self.some_greedy = any(t == 0 for t in temperature)
        self.nucleus = any(p < 1 for p in top_p)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Target or draft distribution ``[B, ..., V]``; rows with temperature 0 become one-hot argmax."""
        if self.all_greedy:
            return one_hot_argmax(logits)
        shape = (-1,) + (1,) * (logits.dim() - 1)
        pr = torch.softmax(logits / self.temperature.clamp_min(1e-6).view(shape), dim=-1)
        if self.nucleus:
            sorted_p, order = pr.sort(dim=-1, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
            drop = (sorted_p.cumsum(-1) - sorted_p) >= self.top_p.view(shape)
            pr = pr.scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
            pr = pr / pr.sum(-1, keepdim=True)
        if self.some_greedy:
            pr = torch.where((self.temperature == 0).view(shape), one_hot_argmax(logits), pr)
        return pr


def one_hot_argmax(logits: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)


def sample(pr: torch.Tensor, exponentials: torch.Tensor) -> torch.Tensor:
    """Draw from ``pr`` by the exponential race: argmax(p / E) with E ~ Exp(1) is distributed as p."""
    return (pr / exponentials).argmax(-1)


def accept_mask(p_draft: torch.Tensor, q_draft: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The standard rule: accept draft token x with probability min(1, p(x) / q(x))."""
    return u * q_draft <= p_draft


def conditional_rates(rates: list[float]) -> list[float]:
    """Per-position unconditional acceptance rates (position i: the first i+1 drafts all accepted) as
    the chance of accepting position i given the ones before it were, as vLLM's synthetic sampler
    draws them (vllm/v1/spec_decode/utils.py); 0 after a position that is never reached."""
    return [r / before if before > 0 else 0.0 for r, before in zip(rates, [1.0, *rates[:-1]], strict=True)]


def synthetic_accept(u: torch.Tensor, conditional: torch.Tensor, k_eff: torch.Tensor) -> torch.Tensor:
    """Synthetic acceptance: each row accepts draft i when ``u[i] < conditional[i]`` and every draft
    before it was accepted, whatever the draft and the target say; ``u`` ``[B, K]`` uniforms."""
    k = u.shape[1]
    ok = (u < conditional[:k]) & (torch.arange(k, device=u.device) < k_eff[:, None])
    return ok.int().cumprod(-1).sum(-1)


def verify(
    p: torch.Tensor,
    q: torch.Tensor,
    draft: torch.Tensor,
    k_eff: torch.Tensor,
    u: torch.Tensor,
    exponentials: torch.Tensor,
    synthetic: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Accept a prefix of each row's draft chain and pick the token that follows it.

    p: target distributions ``[B, K+1, V]`` at the K+1 verified positions; q: draft distributions
    ``[B, K, V]``; draft: ``[B, K]`` proposed ids; k_eff: ``[B]`` how many of them count per row;
    u: ``[B, K]`` uniforms; exponentials: ``[B, K+1, V]``. Returns (accepted count ``[B]``, next
    token ``[B]``): a sample from norm(max(0, p - q)) after a rejection, else the bonus from p.
    The emitted tokens are then distributed exactly as the target's.

    ``synthetic`` (per-position conditional rates): accept by ``synthetic_accept`` instead, and take the
    next token from p itself, as vLLM's synthetic sampler does; outputs are then not the target's.
    """
    b, k = draft.shape
    rows = torch.arange(b, device=p.device)
    if synthetic is not None:
        accepted = synthetic_accept(u, synthetic, k_eff) if k else torch.zeros(b, dtype=torch.long, device=p.device)
        return accepted, sample(p[rows, accepted], exponentials[rows, accepted])
    if k:
        p_d = p[:, :k].gather(-1, draft[..., None]).squeeze(-1)
        q_d = q.gather(-1, draft[..., None]).squeeze(-1)
        ok = accept_mask(p_d, q_d, u) & (torch.arange(k, device=p.device) < k_eff[:, None])
        accepted = ok.int().cumprod(-1).sum(-1)
    else:
        accepted = torch.zeros(b, dtype=torch.long, device=p.device)
    p_next = p[rows, accepted]
    rejected = accepted < k_eff
    q_next = torch.cat([q, torch.zeros_like(p[:, :1])], dim=1)[rows, accepted] * rejected[:, None]
    residual = (p_next - q_next).clamp_min(0.0)
    # p == q at the rejected position cannot reject; guard against an all-zero residual from rounding.
    residual = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p_next)
    return accepted, sample(residual, exponentials[rows, accepted])
