"""A pure-torch Llama (RMSNorm, RoPE, SwiGLU, GQA) over HF checkpoints, with a slot-based KV cache.

The cache holds one slot per running sequence, compacted so the running set is always slots
``0..B-1``: a step is then one batched forward over a contiguous view, with no gathering of caches.
Each row writes its new tokens at its own positions; a per-row causal mask hides both other rows'
longer histories and anything past a row's length (rolled-back speculative tokens are simply
overwritten later, never erased).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.nn.attention import SDPBackend, sdpa_kernel

# The attention backends the reference engine lets scaled_dot_product_attention choose from: all but
# cuDNN's. cuDNN attention (preferred for bfloat16/float16 on Hopper and newer GPUs) builds an
# execution plan per query/KV shape, tens of ms of host time, and reuses it only when the shape repeats.
# Here shapes rarely repeat: KV lengths grow every step, and with speculation they vary with acceptance
# per row and per step, so nearly every call paid that setup for a few µs of GPU work (issue 17: on an
# H200, bfloat16 speculation ran at 0.15x its baseline at batch 64 while float32 gained 1.12x).
# Flash (unused here: it takes no mask), memory-efficient and math kernels have no per-shape setup;
# on a CPU only flash and math exist, so this changes nothing there.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]

    @classmethod
    def from_dir(cls, path: Path) -> LlamaConfig:
        raw = json.loads((path / "config.json").read_text())
        arch = raw.get("architectures") or []
        if raw.get("model_type") != "llama" or arch != ["LlamaForCausalLM"]:
            raise ValueError(f"{path}: not a LlamaForCausalLM checkpoint (architectures={arch})")
        if raw.get("rope_scaling"):
            raise ValueError(f"{path}: rope_scaling is not supported by the reference engine")
        return cls.from_raw(raw)

    @classmethod
    def from_raw(cls, raw: dict) -> LlamaConfig:
        """The fields of a Hugging Face Llama ``config.json``, with its defaults for the optional ones."""
        heads = raw["num_attention_heads"]
        eos = raw.get("eos_token_id")
        return cls(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            intermediate_size=raw["intermediate_size"],
            num_layers=raw["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=raw.get("num_key_value_heads") or heads,
            head_dim=raw.get("head_dim") or raw["hidden_size"] // heads,
            rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
            rope_theta=raw.get("rope_theta", 10000.0),
            max_position_embeddings=raw.get("max_position_embeddings", 2048),
            tie_word_embeddings=raw.get("tie_word_embeddings", False),
            bos_token_id=raw.get("bos_token_id"),
            eos_token_ids=tuple(eos if isinstance(eos, list) else [] if eos is None else [eos]),
        )


class KVCache:
    """Per-model cache ``[layers, slots, kv_heads, capacity, head_dim]``; capacity grows by doubling.

    Zero-filled, never uninitialized: masked-out keys still meet their values in the attention matmul
    (weight 0 times a garbage NaN is NaN).
    """

    def __init__(self, cfg: LlamaConfig, slots: int, dtype: torch.dtype, device: torch.device) -> None:
        self.shape = (cfg.num_layers, slots, cfg.num_kv_heads, 0, cfg.head_dim)
        self.k = torch.empty(self.shape, dtype=dtype, device=device)
        self.v = torch.empty_like(self.k)

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def reserve(self, length: int) -> None:
        if length <= self.capacity:
            return
        cap = max(64, self.capacity)
        while cap < length:
            cap *= 2
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:3], cap, old.shape[4]))
            new[:, :, :, : old.shape[3]] = old
            setattr(self, name, new)

    def move(self, src: int, dst: int) -> None:
        """Copy slot ``src`` into ``dst`` (compaction after a sequence leaves)."""
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]


class Llama:
    """Weights as plain tensors, q/k/v and gate/up fused: fewer, larger matmuls per layer."""

    def __init__(
        self,
        path: Path,
        dtype: torch.dtype,
        device: torch.device,
        max_len: int,
        weights: dict[str, torch.Tensor] | None = None,
        config: LlamaConfig | None = None,
    ) -> None:
        """``weights``/``config``: already read and renamed (an EAGLE-3 head's layer); else ``path``'s."""
        self.cfg = cfg = config or LlamaConfig.from_dir(path)
        raw = weights if weights is not None else load_file(str(path / "model.safetensors"), device="cpu")

        def w(name: str) -> torch.Tensor:
            if name not in raw:
                raise ValueError(f"{path}: missing weight {name}")
            return raw[name].to(device=device, dtype=dtype)

        self.embed = w("model.embed_tokens.weight")
        self.lm_head = self.embed if cfg.tie_word_embeddings else w("lm_head.weight")
        self.norm = w("model.norm.weight")
        self.layers = []
        for i in range(cfg.num_layers):
            p = f"model.layers.{i}."
            attn, mlp = p + "self_attn.", p + "mlp."
            self.layers.append(
                (
                    w(p + "input_layernorm.weight"),
                    torch.cat([w(attn + "q_proj.weight"), w(attn + "k_proj.weight"), w(attn + "v_proj.weight")]),
                    w(attn + "o_proj.weight"),
                    w(p + "post_attention_layernorm.weight"),
                    torch.cat([w(mlp + "gate_proj.weight"), w(mlp + "up_proj.weight")]),
                    w(mlp + "down_proj.weight"),
                )
            )
        # HF Llama RoPE (rotate-half layout), tabulated once for every position a request can reach.
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.cos = angles.cos().to(device=device, dtype=dtype)
        self.sin = angles.sin().to(device=device, dtype=dtype)
        self.dtype, self.device = dtype, device
        # Layer ids whose incoming residual stream forward() keeps in ``captured`` (an EAGLE-3 head's
        # inputs; id num_layers: after the last layer, before the norm), as vLLM collects them.
        self.capture: tuple[int, ...] = ()
        self.captured: list[torch.Tensor] = []

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, weight.shape, weight, self.cfg.rms_norm_eps)

    @staticmethod
    def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    @sdpa_kernel(ATTENTION_BACKENDS)
    def forward(
        self, tokens: torch.Tensor, start: torch.Tensor, kv_len: int, cache: KVCache, slot0: int = 0
    ) -> torch.Tensor:
        """Final hidden states ``[B, T, hidden]`` for ``tokens`` ``[B, T]`` placed at ``start[b] + t``.

        Rows are cache slots ``slot0..slot0+B-1``. ``kv_len`` (= max(start) + T, known to the caller without a
        device sync) bounds the keys attended to.
        """
        cfg = self.cfg
        cos, sin, mask, rows, pos = self._placement(tokens, start, kv_len, slot0)
        cache.reserve(kv_len)
        x = F.embedding(tokens, self.embed)
        self.captured = []
        for i, (ln1, wqkv, wo, ln2, wgu, wdown) in enumerate(self.layers):
            if i in self.capture:
                self.captured.append(x)
            attn = self._attention(
                F.linear(self._rms(x, ln1), wqkv), (cos, sin, mask, rows, pos), cache, i, slot0, kv_len
            )
            x = x + F.linear(attn, wo)
            gate, up = F.linear(self._rms(x, ln2), wgu).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, wdown)
        if cfg.num_layers in self.capture:
            self.captured.append(x)
        return self._rms(x, self.norm)

    def _placement(self, tokens: torch.Tensor, start: torch.Tensor, kv_len: int, slot0: int) -> tuple:
        """RoPE tables, causal mask, cache rows and positions of ``tokens`` placed at ``start[b] + t``."""
        b, t = tokens.shape
        pos = start[:, None] + torch.arange(t, device=tokens.device)
        cos, sin = self.cos[pos][:, :, None], self.sin[pos][:, :, None]  # [B, T, 1, hd]
        mask = (torch.arange(kv_len, device=tokens.device) <= pos[:, :, None])[:, None]  # [B, 1, T, L]
        rows = torch.arange(slot0, slot0 + b, device=tokens.device)[:, None]
        return cos, sin, mask, rows, pos

    def _attention(self, qkv: torch.Tensor, where: tuple, cache: KVCache, layer: int, slot0: int, kv_len: int):
        """Rotate q and k, write k and v into ``cache`` layer ``layer`` and attend: ``[B, T, heads*hd]``."""
        cfg = self.cfg
        cos, sin, mask, rows, pos = where
        b, t, _ = qkv.shape
        nq, nkv, hd = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim, cfg.head_dim
        q, k, v = qkv.split([nq, nkv, nkv], dim=-1)
        q = self._rope(q.view(b, t, cfg.num_heads, hd), cos, sin)
        k = self._rope(k.view(b, t, cfg.num_kv_heads, hd), cos, sin)
        kc, vc = cache.k[layer], cache.v[layer]
        kc[rows, :, pos] = k
        vc[rows, :, pos] = v.view(b, t, cfg.num_kv_heads, hd)
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            kc[slot0 : slot0 + b, :, :kv_len],
            vc[slot0 : slot0 + b, :, :kv_len],
            attn_mask=mask,
            enable_gqa=True,
        )
        return attn.transpose(1, 2).reshape(b, t, nq)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.lm_head).float()


class Eagle3Head(Llama):
    """An EAGLE-3 head (``LlamaForCausalLMEagle3`` checkpoint): ``fc`` fuses the target's residual
    streams at ``aux_layers``; one decoder layer reads [norm(embed(token)), norm(hidden)] (2 x hidden)
    with ``hidden`` as its residual; ``norm`` + ``lm_head`` give logits. As in vLLM's llama_eagle3.py,
    ``forward`` returns the normed output (for logits) and the pre-norm one (the next step's hidden)."""

    def __init__(self, path: Path, target: Llama, dtype: torch.dtype, device: torch.device, max_len: int) -> None:
        raw_cfg = json.loads((path / "config.json").read_text())
        if raw_cfg.get("architectures") != ["LlamaForCausalLMEagle3"]:
            raise ValueError(
                f"{path}: not a LlamaForCausalLMEagle3 head (architectures={raw_cfg.get('architectures')})"
            )
        if raw_cfg.get("draft_vocab_size", raw_cfg["vocab_size"]) != target.cfg.vocab_size:
            raise ValueError(f"{path}: a head with its own draft vocabulary (d2t) is not supported")
        raw = load_file(str(path / "model.safetensors"), device="cpu")
        # Named as a one-layer Llama's weights ("midlayer." is "model.layers.0."), so its loader applies.
        renamed = {_HEAD_NAMES.get(k, k).replace("midlayer.", "model.layers.0."): v for k, v in raw.items()}
        renamed.setdefault("model.embed_tokens.weight", target.embed.cpu())
        super().__init__(path, dtype, device, max_len, weights=renamed, config=_head_config(raw_cfg))
        self.aux_layers = tuple(raw_cfg["eagle_aux_hidden_state_layer_ids"])
        self.fc = renamed["fc.weight"].to(device=device, dtype=dtype)
        self.hidden_norm = renamed["model.layers.0.hidden_norm.weight"].to(device=device, dtype=dtype)

    def fuse(self, states: list[torch.Tensor]) -> torch.Tensor:
        """The target's captured residual streams ``[B, T, hidden]`` each, into the head's input."""
        return F.linear(torch.cat(states, -1), self.fc)

    @sdpa_kernel(ATTENTION_BACKENDS)
    def draft(
        self, tokens: torch.Tensor, hidden: torch.Tensor, start: torch.Tensor, kv_len: int, cache: KVCache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(normed, pre-norm) outputs ``[B, T, hidden]`` for ``tokens`` with their ``hidden`` inputs."""
        where = self._placement(tokens, start, kv_len, 0)
        cache.reserve(kv_len)
        ln1, wqkv, wo, ln2, wgu, wdown = self.layers[0]
        x = torch.cat([self._rms(F.embedding(tokens, self.embed), ln1), self._rms(hidden, self.hidden_norm)], -1)
        x = hidden + F.linear(self._attention(F.linear(x, wqkv), where, cache, 0, 0, kv_len), wo)
        gate, up = F.linear(self._rms(x, ln2), wgu).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, wdown)
        return self._rms(x, self.norm), x


_HEAD_NAMES = {"embed_tokens.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}


def _head_config(raw: dict) -> LlamaConfig:
    """The head's layer as a one-layer Llama's config (its q/k/v read 2 x hidden; nothing else differs)."""
    own = LlamaConfig.from_raw(raw | {"num_hidden_layers": 1})
    return replace(own, tie_word_embeddings=False, eos_token_ids=())
