"""The scheduler and step loop: continuous batching with speculative decoding, in its own thread.

Per round: admit waiting requests into free slots and prefill them (one batched forward; it emits
each one's first token and counts as a verify step), then run ``decode_steps`` steps back to back over
the running set (SGLang's ``--num-continuous-decode-steps``: larger values admit newcomers later). A
step: the drafter proposes up to k tokens per row, the target verifies all of them in one batched
forward, each row accepts its own prefix and emits it plus one token, and both caches roll back to
what was accepted (by length; stale entries are overwritten later). With a depth schedule, a step
drafts the depth the schedule gives for the number of rows running in it (capped by k), as vLLM's
``num_speculative_tokens_per_batch_size`` does. With synthetic acceptance (``--synthetic-acceptance-rates``)
the drafter still drafts and the target still verifies, but a seeded coin per position accepts, as
vLLM's ``rejection_sample_method: synthetic`` does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

import torch

from specexp.depth_schedule import Schedule
from specexp.reference.drafters import Drafter, pad
from specexp.reference.model import KVCache, Llama
from specexp.reference.prometheus import DepthMetrics, EngineMetrics
from specexp.reference.request import RequestState
from specexp.reference.sampling import Sampling, conditional_rates, verify

log = logging.getLogger("specexp.reference")

STATS_INTERVAL_S = 10.0


class BatchEngine:
    def __init__(
        self,
        target: Llama,
        drafter: Drafter | None,
        num_speculative_tokens: int,
        max_running: int,
        decode_steps: int,
        metrics: EngineMetrics,
        schedule: Schedule | None = None,
        synthetic: list[float] | None = None,
        seed: int = 0,
    ) -> None:
        self.target = target
        self.cache = KVCache(target.cfg, max_running, target.dtype, target.device)
        self.drafter = drafter
        self.k = num_speculative_tokens if drafter else 0
        self.max_running = max_running
        self.decode_steps = decode_steps
        self.metrics = metrics
        self.schedule = schedule if drafter else None
        depths = sorted({min(self.k, d) for d in schedule.depths}) if self.schedule else [self.k]
        self.depth_metrics = DepthMetrics(metrics.registry, depths)
        self.eos = set(target.cfg.eos_token_ids)
        self.vocab = target.cfg.vocab_size
        self.device = target.device
        self.one = torch.ones((), device=self.device)  # expanded into the noise of all-greedy steps
        # Synthetic acceptance: conditional per-position rates, and the seeded generator its coins come from.
        self.synthetic = None
        if synthetic is not None and drafter:
            self.synthetic = torch.tensor(conditional_rates(synthetic), device=self.device)
            self.coins = torch.Generator(self.device).manual_seed(seed)
        self.running: list[RequestState] = []  # running[i] lives in cache slot i
        self.waiting: deque[RequestState] = deque()
        self.cond = threading.Condition()
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, name="specexp-engine", daemon=True)
        self._window = [time.monotonic(), 0.0, 0.0, 0.0]  # since, tokens, accepted, drafted: for the stats log

    # -- called from other threads -------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()
        self.thread.join(timeout=10)

    def submit(self, seq: RequestState) -> None:
        with self.cond:
            self.waiting.append(seq)
            self.metrics.waiting.set(len(self.waiting))
            self.cond.notify()

    def abort(self, seq: RequestState) -> None:
        """Mark a request gone (client disconnected); the loop drops it at the next step boundary."""
        seq.aborted = True

    # -- the engine thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        with torch.inference_mode():
            while True:
                with self.cond:
                    while not (self.waiting or self.running or self.stopped):
                        self.cond.wait(timeout=STATS_INTERVAL_S)
                        self._log_stats()
                    if self.stopped:  # the server waits for its handlers, and they for their tokens
                        self._fail([*self.running, *self.waiting])
                        return
                    admitted = self._admit()
                try:
                    if admitted:
                        self._prefill(admitted)
                    for _ in range(self.decode_steps):
                        self._release()
                        if not self.running:
                            break
                        self._step()
                    self._release()
                except Exception:
                    log.exception("engine step failed; failing the running requests")
                    self._fail(self.running)
                    self._release()
                self.metrics.running.set(len(self.running))
                self._log_stats()

    @staticmethod
    def _fail(seqs: list[RequestState]) -> None:
        """End each request as failed: its client gets an error event and the stream's end."""
        for seq in seqs:
            seq.finish = "error"
            seq.emit([], "error")

    def _admit(self) -> list[RequestState]:
        admitted = []
        while self.waiting and len(self.running) + len(admitted) < self.max_running:
            seq = self.waiting.popleft()
            if not seq.aborted:
                seq.admitted = time.monotonic()
                admitted.append(seq)
        self.metrics.waiting.set(len(self.waiting))
        return admitted

    def _noise(self, seqs: list[RequestState]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row: k uniforms (acceptance) and 2k+1 rows of Exp(1) over the vocabulary (k draft
        samples, then k+1 target positions), drawn on the device from the request's own generator.

        Greedy rows take 1s (see sampling.py); a batch with no sampled row gets broadcast views of a
        single 1, so greedy steps allocate, fill and copy nothing here."""
        k, b = self.k, len(seqs)
        sampled = [(i, s.generator) for i, s in enumerate(seqs) if s.generator is not None]
        if not sampled:
            return self.one.expand(b, k), self.one.expand(b, 2 * k + 1, self.vocab)
        u = torch.ones(b, k, device=self.device)
        exps = torch.ones(b, 2 * k + 1, self.vocab, device=self.device)
        for i, generator in sampled:
            u[i].uniform_(generator=generator)
            exps[i].exponential_(generator=generator)
        return u, exps

    def _seed_on_device(self, seqs: list[RequestState]) -> None:
        """Give sampled requests a generator on the engine's device, seeded as the server seeded theirs:
        noise is then drawn where it is used (on a CPU engine the generator is already there)."""
        for seq in seqs:
            if seq.generator is not None and seq.generator.device.type != self.device.type:
                seq.generator = torch.Generator(self.device).manual_seed(seq.generator.initial_seed())

    def _prefill(self, seqs: list[RequestState]) -> None:
        slot0 = len(self.running)
        self.running.extend(seqs)
        self._seed_on_device(seqs)
        tokens = pad([s.prompt for s in seqs], self.device)
        start = torch.zeros(len(seqs), dtype=torch.long, device=self.device)
        hidden = self.target.forward(tokens, start, tokens.shape[1], self.cache, slot0)
        last = torch.tensor([len(s.prompt) - 1 for s in seqs], device=self.device)
        logits = self.target.logits(hidden[torch.arange(len(seqs), device=self.device), last])
        if self.drafter:
            self.drafter.prefill(seqs, slot0)
        self.metrics.prompt_tokens.inc(sum(len(s.prompt) for s in seqs))
        self._finish_step(seqs, logits[:, None], *self._no_draft(len(seqs)))

    def _sampling(self, seqs: list[RequestState]) -> Sampling:
        return Sampling([s.temperature for s in seqs], [s.top_p for s in seqs], self.device)

    def _no_draft(self, rows: int) -> tuple[torch.Tensor, None, torch.Tensor]:
        """(draft, q, k_eff) of a step that proposes nothing."""
        zeros = torch.zeros(rows, dtype=torch.long, device=self.device)
        return zeros[:, None][:, :0], None, zeros

    def _depth(self, rows: int) -> int:
        """The depth a step over ``rows`` running requests drafts: the schedule's, capped by k."""
        return min(self.k, self.schedule.depth(rows)) if self.schedule else self.k

    def _step(self) -> None:
        seqs = self.running
        depth = self._depth(len(seqs))
        k_cap = [min(depth, s.remaining - 1) for s in seqs]
        sampling = self._sampling(seqs)
        lengths = [len(s.tokens) for s in seqs]
        if self.drafter and max(k_cap) > 0:
            u, exps = self._noise(seqs)
            draft, q, k_eff = self.drafter.propose(seqs, k_cap, sampling, exps[:, : self.k])
            if self.synthetic is not None:  # the drafter drafted (its cost is real); a coin accepts
                u = torch.rand(len(seqs), self.k, generator=self.coins, device=self.device)
        else:
            u, exps = None, None
            draft, q, k_eff = self._no_draft(len(seqs))
        width = draft.shape[1]
        tokens = torch.cat([torch.tensor([s.tokens[-1] for s in seqs], device=self.device)[:, None], draft], 1)
        start = torch.tensor(lengths, device=self.device) - 1
        hidden = self.target.forward(tokens, start, max(lengths) + width, self.cache)
        accepted = self._finish_step(seqs, self.target.logits(hidden), draft, q, k_eff, sampling, u, exps, depth)
        if self.drafter:
            self.drafter.commit(seqs, lengths, accepted, width)

    def _finish_step(
        self,
        seqs: list[RequestState],
        logits: torch.Tensor,
        draft: torch.Tensor,
        q: torch.Tensor | None,
        k_eff: torch.Tensor,
        sampling: Sampling | None = None,
        u: torch.Tensor | None = None,
        exps: torch.Tensor | None = None,
        depth: int | None = None,
    ) -> list[int]:
        """Verify, emit, count. Counting rule: a row's step emits n tokens = n - 1 accepted + 1 verify
        step (n - 1 < accepted drafts only when EOS cut the chain), so the counters add up exactly.
        ``depth``: a decode step's scheduled depth, counted per depth (None: prefill)."""
        b, width = draft.shape
        sampling = sampling or self._sampling(seqs)
        if u is None:
            u, exps = self._noise(seqs)
        p = sampling.probs(logits)
        if q is None:
            q = p.new_zeros(b, width, p.shape[-1])
        accepted_t, nxt = verify(
            p, q, draft, k_eff, u[:, :width], exps[:, self.k : self.k + width + 1], self.synthetic if width else None
        )
        accepted, nxt, k_list = accepted_t.tolist(), nxt.tolist(), k_eff.tolist()
        rows = draft.tolist()
        m = self.metrics
        per_pos = [0] * self.k
        emitted_total = accepted_total = 0
        outs = []
        for seq, a, tok, row in zip(seqs, accepted, nxt, rows, strict=True):
            out = [*row[:a], tok]
            if not seq.ignore_eos:
                for i, t in enumerate(out):
                    if t in self.eos:
                        out = out[: i + 1]
                        seq.finish = "stop"
                        break
            seq.tokens.extend(out)
            if seq.finish is None and seq.remaining <= 0:
                seq.finish = "length"
            emitted_total += len(out)
            accepted_total += len(out) - 1
            for i in range(len(out) - 1):
                per_pos[i] += 1
            outs.append(out)
        # Count before emitting: a client that sees its last token and scrapes /metrics sees it counted.
        m.verify_steps.inc(b)
        for seq, k in zip(seqs, k_list, strict=True):
            seq.drafted += k
            seq.drafts += k > 0
        drafted = sum(k_list)
        if drafted:
            m.drafts.inc(sum(k > 0 for k in k_list))
            m.draft_tokens.inc(drafted)
        m.generation_tokens.inc(emitted_total)
        m.accepted.inc(accepted_total)
        for counter, n in zip(m.accepted_per_pos, per_pos, strict=True):
            if n:
                counter.inc(n)
        if depth is not None:
            self.depth_metrics.count(depth, b, drafted, accepted_total)
        done = sum(s.finish is not None for s in seqs)
        if done:
            m.request_success.inc(done)
        self._window[1] += emitted_total
        self._window[2] += accepted_total
        self._window[3] += drafted
        for seq, out in zip(seqs, outs, strict=True):
            seq.emit(out, seq.finish)
        return accepted

    def _release(self) -> None:
        """Drop finished and aborted rows, moving the last row into each freed slot."""
        for slot in range(len(self.running) - 1, -1, -1):
            seq = self.running[slot]
            if seq.finish is None and not seq.aborted:
                continue
            last = len(self.running) - 1
            if slot != last:
                self.cache.move(last, slot)
                if self.drafter:
                    self.drafter.move(last, slot)
                self.running[slot] = self.running[last]
            self.running.pop()

    def _log_stats(self) -> None:
        since, tokens, accepted, drafted = self._window
        now = time.monotonic()
        if now - since < STATS_INTERVAL_S:
            return
        if not (tokens or self.running or self.waiting):  # idle: stay quiet
            self._window[0] = now
            return
        rate = f"{accepted / drafted:.3f}" if drafted else "n/a"
        log.info(
            "running=%d waiting=%d generation=%.1f tok/s accept_rate=%s",
            len(self.running),
            len(self.waiting),
            tokens / (now - since),
            rate,
        )
        self._window = [now, 0.0, 0.0, 0.0]
