"""The training loops of the trained tiny build: a target on text, a draft model distilled from it, and
EAGLE-3 heads trained with training-time test on the target's own responses, all on CPU, each with a
one-line progress report.

Every loop draws its batches from its own seeded generator, so a build is reproducible on one machine
(float reductions may differ across CPUs, so bytes may too; the recipe, not the bytes, names a build).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from specexp.models.nets import CausalLM, Eagle3Head


class Windows:
    """Fixed-length windows of one token stream, drawn at random offsets from a seeded generator."""

    def __init__(self, stream: torch.Tensor, length: int, batch: int, seed: int) -> None:
        self.stream, self.length, self.batch = stream, length, batch
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self) -> torch.Tensor:
        starts = torch.randint(0, len(self.stream) - self.length, (self.batch,), generator=self.gen)
        return torch.stack([self.stream[s : s + self.length] for s in starts.tolist()])


class Rows:
    """Batches of whole rows of a [N, T] tensor, drawn at random from a seeded generator."""

    def __init__(self, rows: torch.Tensor, batch: int, seed: int) -> None:
        self.rows, self.batch = rows, batch
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self) -> torch.Tensor:
        return self.rows[torch.randint(0, len(self.rows), (self.batch,), generator=self.gen)]


def responses(target: CausalLM, prompts: torch.Tensor, new: int, chunk: int = 256) -> torch.Tensor:
    """Each prompt [N, P] followed by the target's ``new`` greedy tokens: EAGLE-3 trains its head on the
    target's own responses (what the head drafts for at inference), not on the text the target learnt."""
    t0 = time.monotonic()
    out = []
    for i in range(0, len(prompts), chunk):
        out.append(target.greedy(prompts[i : i + chunk], new))
        print(f"\r  responses: {i + len(out[-1])}/{len(prompts)} {time.monotonic() - t0:.0f}s", end="", file=sys.stderr)
    print(file=sys.stderr, flush=True)
    return torch.cat(out)


def _loop(
    label: str, params: list[torch.nn.Parameter], steps: int, lr: float, loss_fn: Callable[[], torch.Tensor]
) -> float:
    """AdamW with a short warmup and linear decay; prints ``label step/steps loss`` on stderr."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min((i + 1) / warm, (steps - i) / (steps - warm + 1)))
    t0, smooth = time.monotonic(), None
    for step in range(steps):
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        smooth = loss.item() if smooth is None else 0.9 * smooth + 0.1 * loss.item()
        if step % 10 == 0 or step == steps - 1:
            elapsed = time.monotonic() - t0
            print(
                f"\r  {label}: {step + 1}/{steps} loss {smooth:.3f} {elapsed:.0f}s", end="", file=sys.stderr, flush=True
            )
    print(file=sys.stderr, flush=True)
    return float(smooth or 0.0)


Batches = Callable[[], torch.Tensor]  # each call: the next [batch, length] token ids


def train_target(model: CausalLM, data: Batches, steps: int, lr: float) -> float:
    def loss() -> torch.Tensor:
        ids = data()
        logits, _ = model(ids[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

    return _loop("target", list(model.parameters()), steps, lr, loss)


def _soft_ce(logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against the target's distribution (KL up to the target's entropy), per position."""
    return -(target_logits.softmax(-1) * logits.log_softmax(-1)).sum(-1)


def distill_draft(draft: CausalLM, target: CausalLM, data: Batches, steps: int, lr: float) -> float:
    def loss() -> torch.Tensor:
        ids = data()
        with torch.no_grad():
            teacher, _ = target(ids)
        logits, _ = draft(ids)
        return _soft_ce(logits, teacher).mean()

    return _loop("draft", [p for p in draft.parameters() if p.requires_grad], steps, lr, loss)


def train_eagle3(
    head: Eagle3Head, target: CausalLM, aux: tuple[int, ...], data: Batches, ttt: int, steps: int, lr: float, label: str
) -> float:
    """Training-time test over ``ttt`` steps: step j's label at base t is the target's distribution of
    x[t+j+2]; the steps' losses are averaged (rows past the window's end are masked)."""

    def loss() -> torch.Tensor:
        ids = data()
        with torch.no_grad():
            teacher, states = target(ids, aux)
        outs = head.ttt(ids, head.fc(torch.cat(states, -1)), ttt)
        n = ids.shape[1] - 1
        total = 0.0
        for j, logits in enumerate(outs):
            valid = n - j  # bases whose label position t + j + 1 is inside the window
            total = total + _soft_ce(logits[:, :valid], teacher[:, 1 + j : 1 + j + valid]).mean()
        return total / len(outs)

    return _loop(label, [p for p in head.parameters() if p.requires_grad], steps, lr, loss)
