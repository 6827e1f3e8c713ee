"""Drafters: propose a chain of tokens per running sequence, with the distributions they came from.

Both keep the engine's slot discipline (row i of every batch is cache slot i). ``propose`` returns
``(draft [B, K], q [B, K, V], k_eff [B])``; K is the widest chain in the batch and rows count only
their first ``k_eff`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from numpy.lib.stride_tricks import sliding_window_view

from specexp.reference.model import Eagle3Head, KVCache, Llama
from specexp.reference.request import RequestState
from specexp.reference.sampling import Sampling, sample


def pad(rows: list[list[int]], device: torch.device) -> torch.Tensor:
    """Right-pad with token 0: padded positions land past each row's length and are never attended."""
    width = max(map(len, rows))
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long, device=device)


def draft_chain(
    width: int,
    state: Any,
    logits: Callable[[Any], torch.Tensor],
    advance: Callable[[Any, torch.Tensor, int], Any],
    sampling: Sampling,
    exponentials: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``width`` tokens drafted one after another, and the distributions they were drawn from: each
    from the logits of the current state, which ``advance`` then moves on by that token (step i)."""
    drafts, qs = [], []
    for i in range(width):
        q = sampling.probs(logits(state))
        d = sample(q, exponentials[:, i])
        drafts.append(d)
        qs.append(q)
        if i + 1 < width:
            state = advance(state, d, i)
    return torch.stack(drafts, 1), torch.stack(qs, 1)


class Drafter(Protocol):
    def prefill(self, seqs: list[RequestState], slot0: int) -> None: ...

    def propose(
        self, seqs: list[RequestState], k_cap: list[int], sampling: Sampling, exponentials: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

    def commit(self, seqs: list[RequestState], lengths: list[int], accepted: list[int], width: int) -> None: ...

    def move(self, src: int, dst: int) -> None: ...


class ModelDrafter:
    """A small causal LM with its own KV cache, rolled back to the accepted prefix after each step.

    The draft cache may lag the sequence by two tokens (after a fully accepted chain the last draft
    token was never fed to it), so the first draft forward takes each row's unprocessed tail.
    """

    def __init__(self, model: Llama, slots: int) -> None:
        self.model = model
        self.cache = KVCache(model.cfg, slots, model.dtype, model.device)

    def prefill(self, seqs: list[RequestState], slot0: int) -> None:
        tokens = pad([s.tokens for s in seqs], self.model.device)
        start = torch.zeros(len(seqs), dtype=torch.long, device=self.model.device)
        self.model.forward(tokens, start, tokens.shape[1], self.cache, slot0)
        for s in seqs:
            s.draft_len = len(s.tokens)

    def propose(
        self, seqs: list[RequestState], k_cap: list[int], sampling: Sampling, exponentials: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        device = self.model.device
        width = max(k_cap)
        tails = [s.tokens[s.draft_len :] for s in seqs]
        starts = [s.draft_len for s in seqs]
        tokens = pad(tails, device)
        start = torch.tensor(starts, device=device)
        hidden = self.model.forward(tokens, start, max(starts) + tokens.shape[1], self.cache)
        rows = torch.arange(len(seqs), device=device)
        last = hidden[rows, torch.tensor([len(t) - 1 for t in tails], device=device)]
        lengths = [len(s.tokens) for s in seqs]
        pos = torch.tensor(lengths, device=device)

        def advance(state: torch.Tensor, d: torch.Tensor, i: int) -> torch.Tensor:
            return self.model.forward(d[:, None], pos + i, max(lengths) + i + 1, self.cache)[:, 0]

        drafts, qs = draft_chain(width, last, self.model.logits, advance, sampling, exponentials)
        return drafts, qs, torch.tensor(k_cap, device=device)

    def commit(self, seqs: list[RequestState], lengths: list[int], accepted: list[int], width: int) -> None:
        """The cache now holds each row's tokens up to its last accepted draft it was fed."""
        if width:
            for s, n, a in zip(seqs, lengths, accepted, strict=True):
                s.draft_len = n + min(a, width - 1)

    def move(self, src: int, dst: int) -> None:
        self.cache.move(src, dst)


class Eagle3Drafter:
    """EAGLE-3 as vLLM drafts with it: every target forward leaves the residual streams of the head's
    layers (``target.captured``), fused by ``fc``; position t's fused state and the embedding of token
    t+1 feed the head, whose KV cache so holds every accepted position. A chain then starts at the last
    position and each later step feeds the head its own drafted token and its own pre-norm output.

    Per row, ``RequestState.pending`` holds the fused states of the positions the head has not read yet
    (from ``draft_len`` on): the prompt's after a prefill, the verified and accepted ones after a step.
    """

    def __init__(self, head: Eagle3Head, target: Llama, slots: int) -> None:
        self.head = head
        self.target = target
        target.capture = head.aux_layers
        self.cache = KVCache(head.cfg, slots, head.dtype, head.device)

    def prefill(self, seqs: list[RequestState], slot0: int) -> None:
        fused = self.head.fuse(self.target.captured)
        for i, s in enumerate(seqs):
            s.pending = fused[i, : len(s.prompt)]
            s.draft_len = 0

    def propose(
        self, seqs: list[RequestState], k_cap: list[int], sampling: Sampling, exponentials: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        device, width = self.head.device, max(k_cap)
        states = [s.pending for s in seqs]
        starts = [s.draft_len for s in seqs]
        tokens = pad(
            [s.tokens[s.draft_len + 1 : s.draft_len + 1 + len(h)] for s, h in zip(seqs, states, strict=True)], device
        )
        hidden = torch.nn.utils.rnn.pad_sequence(states, batch_first=True)
        start = torch.tensor(starts, device=device)
        normed, pre = self.head.draft(tokens, hidden, start, max(starts) + tokens.shape[1], self.cache)
        rows = torch.arange(len(seqs), device=device)
        last = torch.tensor([len(h) - 1 for h in states], device=device)
        out, hid = normed[rows, last], pre[rows, last]
        base = torch.tensor([len(s.tokens) - 2 for s in seqs], device=device)  # the last position read
        kv = max(len(s.tokens) for s in seqs)

        def advance(state: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor, i: int) -> tuple[torch.Tensor, ...]:
            step = self.head.draft(d[:, None], state[1][:, None], base + i + 1, kv + i, self.cache)
            return step[0][:, 0], step[1][:, 0]

        drafts, qs = draft_chain(
            width, (out, hid), lambda state: self.head.logits(state[0]), advance, sampling, exponentials
        )
        for s in seqs:
            s.draft_len, s.pending = len(s.tokens) - 1, None
        return drafts, qs, torch.tensor(k_cap, device=device)

    def commit(self, seqs: list[RequestState], lengths: list[int], accepted: list[int], width: int) -> None:
        """The verify forward read positions n-1 .. n-1+width; those up to the last accepted are pending."""
        fused = self.head.fuse(self.target.captured)
        for i, (s, a) in enumerate(zip(seqs, accepted, strict=True)):
            new = fused[i, : min(a, width) + 1]
            s.pending = new if s.pending is None else torch.cat([s.pending, new])

    def move(self, src: int, dst: int) -> None:
        self.cache.move(src, dst)


class NgramDrafter:
    """Prompt lookup: the tokens that followed the latest earlier occurrence of the sequence's last n
    tokens (n from max down to min); q is one-hot, so acceptance is p(x) itself."""

    def __init__(self, n_min: int, n_max: int, vocab_size: int, device: torch.device) -> None:
        self.n_min, self.n_max, self.vocab_size, self.device = n_min, n_max, vocab_size, device

    def lookup(self, tokens: list[int], k: int) -> list[int]:
        if k <= 0:
            return []
        arr = np.asarray(tokens)
        for n in range(self.n_max, self.n_min - 1, -1):
            if len(arr) <= n:
                continue
            # Windows over arr[:-1] start early enough that at least one token follows each match.
            hits = np.flatnonzero((sliding_window_view(arr[:-1], n) == arr[-n:]).all(axis=1))
            if hits.size:
                at = int(hits[-1]) + n
                return arr[at : at + k].tolist()
        return []

    def prefill(self, seqs: list[RequestState], slot0: int) -> None:
        pass

    def propose(
        self, seqs: list[RequestState], k_cap: list[int], sampling: Sampling, exponentials: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        found = [self.lookup(s.tokens, k) for s, k in zip(seqs, k_cap, strict=True)]
        k_eff = torch.tensor([len(f) for f in found], device=self.device)
        none = torch.zeros(len(seqs), 0, dtype=torch.long, device=self.device)
        draft = pad(found, self.device) if any(found) else none
        return draft, F.one_hot(draft, self.vocab_size).float(), k_eff

    def commit(self, seqs: list[RequestState], lengths: list[int], accepted: list[int], width: int) -> None:
        pass

    def move(self, src: int, dst: int) -> None:
        pass
