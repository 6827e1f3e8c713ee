"""``model=tiny_trained``: a small Llama trained on the standard library's sources, with drafters trained
on it, so acceptance depends on what is asked (code it has learnt vs random ids), not on the weights.

Built offline on CPU in a few minutes (``benchmarks/build_time.py`` measures it) and cached under
``<outputs>/models/tiny_trained/``, named by the recipe's hash (sizes, seeds, steps and the content
hashes of the training and held-out text). Folders (each a self-contained checkpoint vLLM loads):

- ``target/``: the trained target (LlamaForCausalLM), on the corpus mixed with ``noise_fraction`` of noise
  documents (uniform random ids), as a web-trained model has seen noise and continues it as noise;
- ``draft/``: a ``draft_layers``-layer draft model distilled from the target (soft labels) on the corpus;
- ``eagle3/``: an EAGLE-3 head trained with training-time test over ``ttt_steps`` steps, on the target's
  greedy responses to ``responses`` corpus prompts (EAGLE-3 trains on the target's responses: on the
  corpus text itself the heads accepted 0.20 on held-out code, on the responses 0.35);
- ``eagle3_ttt1/``: the same head trained with 1 step;
- ``eagle3_small/``: the ``ttt_steps`` head trained on ``small_fraction`` of those responses.

The drafters learn from the corpus alone, as drafters learn from chat and code, never from noise. So
on random ids the target answers noise with noise the drafters cannot guess, and acceptance depends on
the traffic as a real model's does (without the noise this target answered random ids with the code it
writes anyway, and its heads accepted that better than held-out code: -0.08 [-0.16, -0.01]).

The held-out modules (``corpus.HELD_OUT``) are never trained on: the code workload of
``benchmarks/workload_acceptance.py`` reads them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from specexp.models import corpus
from specexp.models.nets import CausalLM, Eagle3Head, Shape
from specexp.models.tiny import (
    BOS,
    CORPUS,
    EOS,
    Recipe,
    eagle3_config,
    ensure_build,
    llama_config,
    save_model,
    save_tokenizer,
    train_tokenizer,
    write_json,
)
from specexp.models.train import Rows, Windows, distill_draft, responses, train_eagle3, train_target

NAME = "tiny_trained"
HEADS = ("eagle3", "eagle3_ttt1", "eagle3_small")


@dataclass(frozen=True)
class TrainedRecipe(Recipe):
    """The tokenizer's and the checkpoints' sizes (as ``Recipe``) plus the training schedule."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 4
    eagle3_aux_layer_ids: tuple[int, ...] = (1, 2, 4)  # low, mid, high (4: after the last layer)
    seq_len: int = 64
    batch: int = 16
    lr: float = 3e-3
    target_steps: int = 600
    draft_layers: int = 1
    draft_steps: int = 150
    eagle3_steps: int = 300
    ttt_steps: int = 5
    responses: int = 2048  # the heads' training rows: a corpus prompt, then the target's greedy response
    prompt_len: int = 32
    small_fraction: float = 0.25
    noise_fraction: float = 0.1  # noise tokens in the target's training stream, per corpus token
    noise_len: tuple[int, int] = (32, 256)  # ids per noise document, least and most
    version: int = 3  # 2: the heads learn the target's responses, not the corpus; 3: the target sees noise


@dataclass(frozen=True)
class TrainedPaths:
    root: Path
    tokenizer: Path
    target: Path
    draft: Path
    eagle3: Path
    eagle3_ttt1: Path
    eagle3_small: Path


def recipe_hash(recipe: TrainedRecipe = TrainedRecipe()) -> str:
    text = {"train": corpus.digest(CORPUS), "held_out": corpus.digest(corpus.HELD_OUT)}
    return hashlib.sha256(json.dumps({"recipe": asdict(recipe), "text": text}, sort_keys=True).encode()).hexdigest()[
        :16
    ]


def _shape(r: TrainedRecipe) -> Shape:
    return Shape(
        r.vocab_size, r.hidden_size, r.intermediate_size, r.num_heads, r.num_kv_heads, r.rms_norm_eps, r.rope_theta
    )


def _documents(tok: object, names: tuple[str, ...]) -> list[torch.Tensor]:
    """Each module's tokens, BOS first (as the tokenizer adds it), then EOS."""
    eos = tok.token_to_id(EOS)  # type: ignore[attr-defined]
    return [torch.tensor([*tok.encode(text).ids, eos]) for text in corpus.texts(names)]  # type: ignore[attr-defined]


def with_noise(docs: list[torch.Tensor], r: TrainedRecipe, bos: int, eos: int) -> torch.Tensor:
    """``docs`` and noise documents (BOS, ``noise_len`` ids drawn uniformly from the non-special ids, EOS)
    of ``noise_fraction`` as many tokens, shuffled as whole documents into one stream (seeded)."""
    gen = torch.Generator().manual_seed(r.seed + 4)
    ids = torch.tensor([i for i in range(r.vocab_size) if i not in (bos, eos)])
    budget, noise = r.noise_fraction * sum(map(len, docs)), []
    while budget > 0:
        n = int(torch.randint(r.noise_len[0], r.noise_len[1] + 1, (), generator=gen))
        budget -= n + 2
        noise.append(
            torch.cat([torch.tensor([bos]), ids[torch.randint(0, len(ids), (n,), generator=gen)], torch.tensor([eos])])
        )
    mixed = docs + noise
    return torch.cat([mixed[i] for i in torch.randperm(len(mixed), generator=gen).tolist()])


def _head(r: TrainedRecipe, target: CausalLM) -> Eagle3Head:
    """A head whose token embedding is the target's (frozen) and whose LM head starts as the target's."""
    head = Eagle3Head(_shape(r), len(r.eagle3_aux_layer_ids))
    with torch.no_grad():
        head.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        head.lm_head.weight.copy_(target.lm_head.weight)
    head.embed_tokens.weight.requires_grad_(False)
    return head


def _weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _build(root: Path, r: TrainedRecipe, digest: str) -> None:
    """Deterministic kernels on one thread: the same reduction order on any machine (and on a shared
    two-core box one thread trains ~10x faster than two fighting the other processes for cores)."""
    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        _train_all(root, r, digest)
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def _train_all(root: Path, r: TrainedRecipe, digest: str) -> None:
    t0 = time.monotonic()
    print(f"building {NAME} ({digest}) into {root.parent}", file=sys.stderr, flush=True)
    tok = train_tokenizer(r)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    save_tokenizer(tok, r, root / "tokenizer")
    docs = _documents(tok, CORPUS)
    stream = torch.cat(docs)
    shape = _shape(r)

    torch.manual_seed(r.seed)
    target = CausalLM(shape, r.num_layers)
    noisy = with_noise(docs, r, bos, eos)
    train_target(target, Windows(noisy, r.seq_len + 1, r.batch, r.seed), r.target_steps, r.lr)
    target.eval().requires_grad_(False)
    save_model(root / "target", llama_config(r, r.num_layers, bos, eos), _weights(target), root / "tokenizer")

    torch.manual_seed(r.seed + 1)
    draft = CausalLM(shape, r.draft_layers)
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        draft.lm_head.weight.copy_(target.lm_head.weight)
    distill_draft(draft, target, Windows(stream, r.seq_len, r.batch, r.seed + 1), r.draft_steps, r.lr)
    save_model(root / "draft", llama_config(r, r.draft_layers, bos, eos), _weights(draft), root / "tokenizer")

    rows = responses(target, Windows(stream, r.prompt_len, r.responses, r.seed + 3)(), r.seq_len - r.prompt_len)
    small = rows[: int(len(rows) * r.small_fraction)]
    runs = {"eagle3": (rows, r.ttt_steps), "eagle3_ttt1": (rows, 1), "eagle3_small": (small, r.ttt_steps)}
    for name, (data, ttt) in runs.items():
        torch.manual_seed(r.seed + 2)  # the same initial head for every variant: only the training differs
        head = _head(r, target)
        batches = Rows(data, r.batch, r.seed + 2)
        train_eagle3(head, target, r.eagle3_aux_layer_ids, batches, ttt, r.eagle3_steps, r.lr, name)
        save_model(root / name, eagle3_config(r, bos, eos), _weights(head), root / "tokenizer")
    write_json(root / "recipe.json", {"hash": digest, "recipe": asdict(r)})
    print(f"built {NAME} in {time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)


def _paths(root: Path) -> TrainedPaths:
    return TrainedPaths(root, root / "tokenizer", root / "target", root / "draft", *(root / h for h in HEADS))


def ensure_tiny_trained(outputs: Path, recipe: TrainedRecipe = TrainedRecipe()) -> TrainedPaths:
    """Build ``<outputs>/models/tiny_trained`` unless its stamp matches the recipe; safe across processes."""
    digest = recipe_hash(recipe)
    return _paths(ensure_build(Path(outputs), NAME, digest, lambda tmp: _build(tmp, recipe, digest)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specexp.models.tiny_trained", description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=Path, default=Path("outputs"), help="outputs folder (default: ./outputs)")
    args = parser.parse_args(argv)
    paths = ensure_tiny_trained(args.outputs)
    print(json.dumps({k: str(v) for k, v in asdict(paths).items()}, indent=2))


if __name__ == "__main__":
    main()
