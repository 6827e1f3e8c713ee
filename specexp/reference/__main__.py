"""``python -m specexp.reference``: start the reference server (argv built by the torch engine adapter)."""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
from pathlib import Path

import torch
from aiohttp import web
from tokenizers import Tokenizer

from specexp.depth_schedule import Schedule, ScheduleError
from specexp.reference.api import ApiServer, ServerSettings
from specexp.reference.chat import ChatTemplate
from specexp.reference.drafters import Drafter, Eagle3Drafter, ModelDrafter, NgramDrafter
from specexp.reference.model import Eagle3Head, Llama, LlamaConfig
from specexp.reference.prometheus import EngineMetrics
from specexp.reference.scheduler import BatchEngine

log = logging.getLogger("specexp.reference")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specexp.reference", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="HF Llama checkpoint directory")
    p.add_argument("--served-model-name", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument(
        "--draft-model", type=Path, help="draft checkpoint or EAGLE-3 head (alone: --speculative-method draft_model)"
    )
    p.add_argument("--speculative-method", choices=("draft_model", "eagle3", "ngram"))
    p.add_argument("--num-speculative-tokens", type=int, help="draft chain length k")
    p.add_argument(
        "--schedule",
        help="depth per number of running requests, JSON [[batch_from, batch_to, depth], ...] (capped by k)",
    )
    p.add_argument(
        "--synthetic-acceptance-rates",
        help="accept by a seeded coin, not the target: JSON per-position unconditional rates, one per draft step",
    )
    p.add_argument("--prompt-lookup-min", type=int, help="ngram: shortest suffix to match (default 1)")
    p.add_argument("--prompt-lookup-max", type=int, help="ngram: longest suffix to match (default 3)")
    p.add_argument("--max-running-requests", type=int, required=True)
    p.add_argument("--num-continuous-decode-steps", type=int, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="float32")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0, help="seeds the generators of requests that send no seed")
    p.add_argument("--max-model-len", type=int, help="context length (default: max_position_embeddings)")
    return p


def check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject inconsistent flags with a message naming them (argparse exits with status 2)."""
    if args.draft_model and args.speculative_method is None:
        args.speculative_method = "draft_model"
    method = args.speculative_method
    if method in ("draft_model", "eagle3") and not args.draft_model:
        p.error(f"--speculative-method {method} needs --draft-model")
    if method == "ngram" and args.draft_model:
        p.error("--draft-model does not go with --speculative-method ngram")
    if method is None and args.num_speculative_tokens is not None:
        p.error("--num-speculative-tokens needs --draft-model or --speculative-method")
    if method and (args.num_speculative_tokens is None or args.num_speculative_tokens < 1):
        p.error("speculation needs --num-speculative-tokens >= 1")
    if args.schedule is not None:
        if method is None:
            p.error("--schedule needs --draft-model or --speculative-method")
        try:
            args.schedule = Schedule.parse(json.loads(args.schedule))
        except (json.JSONDecodeError, ScheduleError) as exc:
            p.error(f"--schedule: {exc}")
    if args.synthetic_acceptance_rates is not None:
        args.synthetic_acceptance_rates = synthetic_rates(
            p, args.synthetic_acceptance_rates, method, k=args.num_speculative_tokens
        )
    if method != "ngram" and (args.prompt_lookup_min is not None or args.prompt_lookup_max is not None):
        p.error("--prompt-lookup-min/max only apply to --speculative-method ngram")
    if method == "ngram":
        args.prompt_lookup_min = args.prompt_lookup_min or 1
        args.prompt_lookup_max = args.prompt_lookup_max or max(3, args.prompt_lookup_min)
        if not 1 <= args.prompt_lookup_min <= args.prompt_lookup_max:
            p.error("need 1 <= --prompt-lookup-min <= --prompt-lookup-max")
    for flag in ("max_running_requests", "num_continuous_decode_steps", "threads", "max_model_len"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
    if not 0 < args.port < 65536:
        p.error(f"--port {args.port} is not a TCP port")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available to torch")
    for flag, path in (("--model", args.model), ("--draft-model", args.draft_model)):
        if path is not None and not (path / "config.json").is_file():
            p.error(f"{flag} {path}: no config.json there")
    if not (args.model / "tokenizer.json").is_file():
        p.error(f"--model {args.model}: no tokenizer.json there")
    try:
        target = LlamaConfig.from_dir(args.model)
        draft = LlamaConfig.from_dir(args.draft_model) if method == "draft_model" else None
        if method == "eagle3":
            head = json.loads((args.draft_model / "config.json").read_text())
            if head.get("architectures") != ["LlamaForCausalLMEagle3"]:
                raise ValueError(f"--draft-model {args.draft_model} is not a LlamaForCausalLMEagle3 head")
            if max(head["eagle_aux_hidden_state_layer_ids"]) > target.num_layers:
                raise ValueError(
                    f"the head reads layers {head['eagle_aux_hidden_state_layer_ids']}"
                    f" of a {target.num_layers}-layer target"
                )
    except (ValueError, KeyError) as exc:
        p.error(f"unsupported checkpoint: {exc}")
    if draft is not None and draft.vocab_size != target.vocab_size:
        p.error(f"draft vocab ({draft.vocab_size}) differs from the target's ({target.vocab_size})")
    if args.max_model_len is None:
        args.max_model_len = target.max_position_embeddings
    if args.max_model_len > target.max_position_embeddings:
        p.error(f"--max-model-len {args.max_model_len} > the model's {target.max_position_embeddings} positions")


def synthetic_rates(p: argparse.ArgumentParser, text: str, method: str | None, k: int) -> list[float]:
    """``--synthetic-acceptance-rates`` read and checked as vLLM checks them."""
    if method is None:
        p.error("--synthetic-acceptance-rates needs --draft-model or --speculative-method")
    try:
        rates = [float(r) for r in json.loads(text)]
    except (json.JSONDecodeError, TypeError, ValueError):
        p.error(f"--synthetic-acceptance-rates {text!r} is not a JSON list of numbers")
    if len(rates) != k or not all(0 <= r <= 1 for r in rates) or any(b > a for a, b in itertools.pairwise(rates)):
        p.error(f"--synthetic-acceptance-rates {rates}: need {k} rates in [0, 1], non-increasing")
    return rates


def build(args: argparse.Namespace) -> ApiServer:
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    k = args.num_speculative_tokens or 0
    rope_len = args.max_model_len + k + 1  # drafts of rows near their end may run past max_model_len
    target = Llama(args.model, dtype, device, rope_len)
    drafter: Drafter | None = None
    if args.speculative_method == "draft_model":
        same = args.draft_model.resolve() == args.model.resolve()
        draft = target if same else Llama(args.draft_model, dtype, device, rope_len)
        drafter = ModelDrafter(draft, args.max_running_requests)
    elif args.speculative_method == "eagle3":
        drafter = Eagle3Drafter(
            Eagle3Head(args.draft_model, target, dtype, device, rope_len), target, args.max_running_requests
        )
    elif args.speculative_method == "ngram":
        drafter = NgramDrafter(args.prompt_lookup_min, args.prompt_lookup_max, target.cfg.vocab_size, device)
    metrics = EngineMetrics(k)
    engine = BatchEngine(
        target,
        drafter,
        k,
        args.max_running_requests,
        args.num_continuous_decode_steps,
        metrics,
        args.schedule,
        args.synthetic_acceptance_rates,
        args.seed,
    )
    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    settings = ServerSettings(args.served_model_name, args.max_model_len, args.seed)
    return ApiServer(engine, tokenizer, settings, ChatTemplate.from_dir(args.model))


def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    check(p, args)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    server = build(args)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    if args.schedule is not None:
        settings["schedule"] = args.schedule.as_list()
    settings["torch_threads"] = torch.get_num_threads()
    log.info("starting on http://%s:%d with %s", args.host, args.port, json.dumps(settings, sort_keys=True))
    # SIGTERM ends the running requests (BatchEngine.stop); the handlers then have seconds, not aiohttp's 60
    web.run_app(server.app(), host=args.host, port=args.port, print=None, access_log=None, shutdown_timeout=5)


if __name__ == "__main__":
    main()
