"""``model=tiny``: a small HF-format Llama target, its drafters and a tokenizer, built offline.

Everything is derived from a recipe (sizes, seeds, the training text's content hash), so a checkout
builds the same bytes on every run and on every machine with the same Python standard library,
without a model hub. The target's later layers are damped (their residual writes scaled down) so that
its first layer alone, the ``tiny`` drafter, agrees with it often but not always: a drafter with a
realistic acceptance rate rather than 0 (unrelated random models) or 1 (a copy).

Layout under ``<outputs>/models/tiny/``: ``target/``, ``draft/``, ``eagle3/`` (each self-contained: config,
weights and tokenizer files, loadable by vLLM), ``tokenizer/`` and the stamp ``recipe.json``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS, EOS = "<s>", "</s>"

# The chat template, in tokenizer_config.json where Hugging Face tokenizers and vLLM read it: each turn
# is ``<|role|>`` on its own line, the content, then EOS; a generation prompt opens the assistant's turn.
# The role markers are plain text (no new special tokens), so the tokenizer, and so the weights, are
# those of a template-free build.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

# Standard-library modules that exist in every CPython 3.11+ as plain files; their text trains the
# tokenizer. Their content hash is part of the recipe, so another Python version rebuilds, never mixes.
CORPUS = (
    "argparse.py",
    "ast.py",
    "base64.py",
    "bisect.py",
    "calendar.py",
    "configparser.py",
    "contextlib.py",
    "copy.py",
    "csv.py",
    "dataclasses.py",
    "datetime.py",
    "difflib.py",
    "enum.py",
    "fractions.py",
    "functools.py",
    "heapq.py",
    "inspect.py",
    "json/decoder.py",
    "json/encoder.py",
    "pprint.py",
    "random.py",
    "shutil.py",
    "statistics.py",
    "string.py",
    "textwrap.py",
    "threading.py",
    "typing.py",
)


@dataclass(frozen=True)
class Recipe:
    """Every number that shapes the build; its hash (with the corpus hash) names the build."""

    vocab_size: int = 2048
    hidden_size: int = 256
    intermediate_size: int = 512
    num_layers: int = 8
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    seed: int = 0
    # Logit scale: std of lm_head rows times sqrt(hidden); ~3 gives peaked but not one-hot distributions.
    head_std: float = 0.2
    # Scale of the residual writes (o_proj, down_proj) of layers 1..N-1: sets the tiny drafter's acceptance.
    damping: float = 0.08
    eagle3_aux_layer_ids: tuple[int, ...] = (1, 4, 7)
    version: int = 3  # 2: the EAGLE-3 head has no d2t/t2d (vLLM 0.32 loads it); 3: a chat template


@dataclass(frozen=True)
class TinyPaths:
    root: Path
    tokenizer: Path
    target: Path
    draft: Path
    eagle3: Path

    @property
    def tiny_self(self) -> Path:
        """The target used as its own drafter: acceptance ~1 by construction."""
        return self.target


def _corpus_files() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [stdlib / name for name in CORPUS if (stdlib / name).is_file()]


def recipe_hash(recipe: Recipe = Recipe()) -> str:
    digest = hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode())
    for path in _corpus_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def train_tokenizer(recipe: Recipe) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([p.read_text(encoding="utf-8") for p in _corpus_files()], trainer)
    # Prepend BOS the way HF Llama tokenizers do, so vLLM and the reference engine see the same ids.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    if tok.get_vocab_size() != recipe.vocab_size:
        raise RuntimeError(f"tokenizer has {tok.get_vocab_size()} tokens, recipe wants {recipe.vocab_size}")
    return tok


def save_tokenizer(tok: Tokenizer, recipe: Recipe, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    special = {"bos_token": BOS, "eos_token": EOS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "model_max_length": recipe.max_position_embeddings,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    write_json(out / "tokenizer_config.json", config)
    write_json(out / "special_tokens_map.json", special)


def write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def llama_config(recipe: Recipe, num_layers: int, bos: int, eos: int, **extra: object) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.hidden_size,
        "intermediate_size": recipe.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": recipe.num_heads,
        "num_key_value_heads": recipe.num_kv_heads,
        "head_dim": recipe.hidden_size // recipe.num_heads,
        "hidden_act": "silu",
        "max_position_embeddings": recipe.max_position_embeddings,
        "rms_norm_eps": recipe.rms_norm_eps,
        "rope_theta": recipe.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": bos,
        "eos_token_id": eos,
        "use_cache": True,
        **extra,
    }


def eagle3_config(recipe: Recipe, bos: int, eos: int) -> dict[str, object]:
    """An EAGLE-3 head's config.json as vLLM reads it: one decoder layer over the target's vocabulary,
    fed the residual streams entering the target's layers ``eagle3_aux_layer_ids``."""
    return llama_config(
        recipe,
        1,
        bos,
        eos,
        architectures=["LlamaForCausalLMEagle3"],
        draft_vocab_size=recipe.vocab_size,
        target_hidden_size=recipe.hidden_size,
        eagle_aux_hidden_state_layer_ids=list(recipe.eagle3_aux_layer_ids),
    )


def _layer(prefix: str, recipe: Recipe, gen: torch.Generator, residual_scale: float, qkv_in: int) -> dict:
    """One Llama decoder layer: 1/sqrt(fan_in) init keeps activations O(1) at any depth."""
    h, inter = recipe.hidden_size, recipe.intermediate_size
    hd = h // recipe.num_heads

    def linear(out_f: int, in_f: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(out_f, in_f, generator=gen) * (scale / in_f**0.5)

    return {
        f"{prefix}.self_attn.q_proj.weight": linear(recipe.num_heads * hd, qkv_in),
        f"{prefix}.self_attn.k_proj.weight": linear(recipe.num_kv_heads * hd, qkv_in),
        f"{prefix}.self_attn.v_proj.weight": linear(recipe.num_kv_heads * hd, qkv_in),
        f"{prefix}.self_attn.o_proj.weight": linear(h, recipe.num_heads * hd, residual_scale),
        f"{prefix}.mlp.gate_proj.weight": linear(inter, h),
        f"{prefix}.mlp.up_proj.weight": linear(inter, h),
        f"{prefix}.mlp.down_proj.weight": linear(h, inter, residual_scale),
        f"{prefix}.input_layernorm.weight": torch.ones(h),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(h),
    }


def _target_weights(recipe: Recipe) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(recipe.seed)
    h = recipe.hidden_size
    weights = {"model.embed_tokens.weight": torch.randn(recipe.vocab_size, h, generator=gen)}
    for i in range(recipe.num_layers):
        weights |= _layer(f"model.layers.{i}", recipe, gen, 1.0 if i == 0 else recipe.damping, h)
    weights["model.norm.weight"] = torch.ones(h)
    weights["lm_head.weight"] = torch.randn(recipe.vocab_size, h, generator=gen) * recipe.head_std
    return weights


def _eagle3_weights(recipe: Recipe, target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Random EAGLE-3 head in the original checkpoint layout read by vLLM's llama_eagle3.py:
    ``fc`` fuses the 3 aux hidden states, ``midlayer`` takes [embeds, hidden] (2x hidden) into q/k/v,
    No ``d2t``/``t2d`` vocabulary map: the head drafts over the target's full vocabulary, and vLLM
    0.32 refuses a ``d2t`` tensor when the two vocabularies are the same size."""
    gen = torch.Generator().manual_seed(recipe.seed + 1)
    h = recipe.hidden_size
    n_aux = len(recipe.eagle3_aux_layer_ids)
    weights = _layer("midlayer", recipe, gen, 1.0, 2 * h)
    weights["midlayer.hidden_norm.weight"] = torch.ones(h)
    weights["fc.weight"] = torch.randn(h, n_aux * h, generator=gen) / (n_aux * h) ** 0.5
    weights["norm.weight"] = torch.ones(h)
    weights["lm_head.weight"] = target["lm_head.weight"].clone()
    weights["embed_tokens.weight"] = target["model.embed_tokens.weight"].clone()
    return weights


def save_model(out: Path, config: dict, weights: dict[str, torch.Tensor], tokenizer_dir: Path) -> None:
    out.mkdir(parents=True)
    write_json(out / "config.json", config)
    gen_config = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
    write_json(out / "generation_config.json", gen_config)
    save_file({k: v.contiguous() for k, v in sorted(weights.items())}, str(out / "model.safetensors"))
    for f in tokenizer_dir.iterdir():
        shutil.copyfile(f, out / f.name)


def _build(root: Path, recipe: Recipe, digest: str) -> None:
    tok = train_tokenizer(recipe)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    save_tokenizer(tok, recipe, root / "tokenizer")
    target = _target_weights(recipe)
    save_model(root / "target", llama_config(recipe, recipe.num_layers, bos, eos), target, root / "tokenizer")
    shared = ("model.embed_tokens.", "model.layers.0.", "model.norm.", "lm_head.")
    draft = {k: v for k, v in target.items() if k.startswith(shared)}
    save_model(root / "draft", llama_config(recipe, 1, bos, eos), draft, root / "tokenizer")
    save_model(root / "eagle3", eagle3_config(recipe, bos, eos), _eagle3_weights(recipe, target), root / "tokenizer")
    write_json(root / "recipe.json", {"hash": digest, "recipe": asdict(recipe)})


def _paths(root: Path) -> TinyPaths:
    return TinyPaths(root, root / "tokenizer", root / "target", root / "draft", root / "eagle3")


def _stamp(root: Path) -> str | None:
    try:
        return json.loads((root / "recipe.json").read_text())["hash"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_tiny(outputs: Path, recipe: Recipe = Recipe()) -> TinyPaths:
    """Build ``<outputs>/models/tiny`` unless its stamp matches the recipe; safe across processes."""
    digest = recipe_hash(recipe)
    return _paths(ensure_build(Path(outputs), "tiny", digest, lambda tmp: _build(tmp, recipe, digest)))


def ensure_build(outputs: Path, name: str, digest: str, build: Callable[[Path], None]) -> Path:
    """``<outputs>/models/<name>``, built by ``build(folder)`` unless its ``recipe.json`` stamp is ``digest``.

    The build goes to a temporary sibling and is renamed into place under an exclusive file lock, so a
    reader never sees a half-written model and two concurrent builders do the work once.
    """
    parent = outputs / "models"
    root = parent / name
    if _stamp(root) == digest:
        return root
    parent.mkdir(parents=True, exist_ok=True)
    with open(parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp(root) != digest:
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}-build-", dir=parent))
            tmp.chmod(0o755)
            try:
                build(tmp)
                if root.exists():
                    stale = Path(tempfile.mkdtemp(prefix=f".{name}-stale-", dir=parent))
                    os.replace(root, stale / name)
                    shutil.rmtree(stale)
                os.replace(tmp, root)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return root


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specexp.models.tiny", description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=Path, default=Path("outputs"), help="outputs folder (default: ./outputs)")
    args = parser.parse_args(argv)
    paths = ensure_tiny(args.outputs)
    print(json.dumps({k: str(v) for k, v in {**asdict(paths), "tiny_self": paths.tiny_self}.items()}, indent=2))


if __name__ == "__main__":
    main()
