"""Trainable twins of the checkpoints the engines load: a Llama and an EAGLE-3 head, as ``nn.Module``s
whose parameter names are the Hugging Face / EAGLE-3 checkpoint names, so ``state_dict()`` is the file.

Only the builder trains with these; the engines read the saved files with their own code (the reference
engine's ``specexp.reference.model``, vLLM's ``llama.py`` and ``llama_eagle3.py``), so a wrong layout
here shows up as a disagreement between engines, not as silently shared code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

KV = tuple[torch.Tensor, torch.Tensor]  # one layer's cached keys and values [B, heads, T, d]


@dataclass(frozen=True)
class Shape:
    """The sizes a Llama layer needs (a slice of a build recipe)."""

    vocab: int
    hidden: int
    inter: int
    heads: int
    kv_heads: int
    eps: float
    theta: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """HF Llama rotate-half RoPE; ``x`` [B, heads, T, d], ``pos`` [T] (any integers)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.outer(pos.double(), inv)
    ang = torch.cat([ang, ang], -1).to(x.dtype)
    half = d // 2
    return x * ang.cos() + torch.cat([-x[..., half:], x[..., :half]], -1) * ang.sin()


class Attention(nn.Module):
    def __init__(self, s: Shape, qkv_in: int) -> None:
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(qkv_in, s.heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(qkv_in, s.kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(qkv_in, s.kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)

    def qkv(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [B, H, T, d]; k, v repeated to H heads (GQA)."""
        b, t, _ = x.shape
        s = self.s
        q = self.q_proj(x).view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        rep = s.heads // s.kv_heads
        k, v = rope(k, pos, s.theta).repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return rope(q, pos, s.theta), k, v

    def out(self, attn: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn.shape
        return self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden, s.inter, bias=False)
        self.up_proj = nn.Linear(s.hidden, s.inter, bias=False)
        self.down_proj = nn.Linear(s.inter, s.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, s: Shape, qkv_in: int | None = None) -> None:
        super().__init__()
        self.self_attn = Attention(s, qkv_in or s.hidden)
        self.mlp = MLP(s)
        self.input_layernorm = nn.RMSNorm(s.hidden, eps=s.eps)
        self.post_attention_layernorm = nn.RMSNorm(s.hidden, eps=s.eps)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.step(x, pos, None)[0]

    def step(self, x: torch.Tensor, pos: torch.Tensor, cache: KV | None) -> tuple[torch.Tensor, KV]:
        """The layer over positions ``pos``: all of a prompt (causal), or one position after the cached ones."""
        q, k, v = self.self_attn.qkv(self.input_layernorm(x), pos)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        x = x + self.self_attn.out(F.scaled_dot_product_attention(q, k, v, is_causal=cache is None))
        return x + self.mlp(self.post_attention_layernorm(x)), (k, v)


class Body(nn.Module):
    def __init__(self, s: Shape, layers: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(Layer(s) for _ in range(layers))
        self.norm = nn.RMSNorm(s.hidden, eps=s.eps)


class CausalLM(nn.Module):
    """``LlamaForCausalLM`` (untied head); ``forward`` also returns the residual stream entering each
    layer id in ``aux`` (id L = after the last layer, before the norm), as vLLM collects EAGLE-3 inputs."""

    def __init__(self, s: Shape, layers: int) -> None:
        super().__init__()
        self.model = Body(s, layers)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)

    def forward(self, ids: torch.Tensor, aux: tuple[int, ...] = ()) -> tuple[torch.Tensor, list[torch.Tensor]]:
        pos = torch.arange(ids.shape[1])
        x = self.model.embed_tokens(ids)
        states = []
        for i, layer in enumerate(self.model.layers):
            if i in aux:
                states.append(x)
            x = layer(x, pos)
        if len(self.model.layers) in aux:
            states.append(x)
        return self.lm_head(self.model.norm(x)), states

    @torch.no_grad()
    def greedy(self, ids: torch.Tensor, new: int) -> torch.Tensor:
        """``ids`` [B, T] extended by ``new`` greedy tokens (a KV cache: one position per step)."""
        cache: list[KV | None] = [None] * len(self.model.layers)
        out, step, start = ids, ids, 0
        for _ in range(new):
            x = self.model.embed_tokens(step)
            pos = torch.arange(start, start + step.shape[1])
            for i, layer in enumerate(self.model.layers):
                x, cache[i] = layer.step(x, pos, cache[i])
            start += step.shape[1]
            step = self.lm_head(self.model.norm(x[:, -1:])).argmax(-1)
            out = torch.cat([out, step], 1)
        return out


class MidLayer(Layer):
    """EAGLE-3's decoder layer: q/k/v read [norm(embeds), norm(hidden)] (2 x hidden); the residual is hidden."""

    def __init__(self, s: Shape) -> None:
        super().__init__(s, 2 * s.hidden)
        self.hidden_norm = nn.RMSNorm(s.hidden, eps=s.eps)


class Eagle3Head(nn.Module):
    """The head as ``LlamaForCausalLMEagle3`` checkpoints hold it: ``fc`` fuses the target's aux hidden
    states, ``midlayer`` drafts, ``norm`` + ``lm_head`` give logits; ``embed_tokens`` is the target's."""

    def __init__(self, s: Shape, n_aux: int) -> None:
        super().__init__()
        self.s = s
        self.fc = nn.Linear(n_aux * s.hidden, s.hidden, bias=False)
        self.midlayer = MidLayer(s)
        self.norm = nn.RMSNorm(s.hidden, eps=s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)

    def ttt(self, ids: torch.Tensor, fused: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """Logits of each training-time-test step over every base position t of ``ids`` [B, T].

        Step j at base t sits at position t + j: it reads the token x[t+j+1] and, for j = 0, the fused
        target state at t, for j > 0 its own previous step's (pre-norm) output, and predicts x[t+j+2].
        Its query attends to step 0's keys at bases <= t (what the target's states wrote into the draft
        cache) and to steps 1..j's keys at base t only (the chain it drafted itself), which is what a
        draft chain sees at inference. Rows past the text end see padding; the caller masks their loss.
        """
        m = self.midlayer
        base = torch.arange(ids.shape[1] - 1)
        hidden = fused[:, :-1]
        causal = base[None, :] <= base[:, None]
        keys, values, out = [], [], []
        for j in range(steps):
            tok = F.pad(ids[:, 1 + j :], (0, j))
            res = hidden
            x = torch.cat([m.input_layernorm(self.embed_tokens(tok)), m.hidden_norm(hidden)], -1)
            q, k, v = m.self_attn.qkv(x, base + j)
            keys.append(k)
            values.append(v)
            scale = q.shape[-1] ** -0.5
            first = (q @ keys[0].transpose(-1, -2) * scale).masked_fill(~causal, float("-inf"))
            diag = [(q * kk).sum(-1, keepdim=True) * scale for kk in keys[1:]]
            w = torch.cat([first, *diag], -1).softmax(-1)
            n = base.shape[0]
            attn = w[..., :n] @ values[0]
            for i, vv in enumerate(values[1:]):
                attn = attn + w[..., n + i : n + i + 1] * vv
            x = res + m.self_attn.out(attn)
            hidden = x + m.mlp(m.post_attention_layernorm(x))
            out.append(self.lm_head(self.norm(hidden)))
        return out
