"""The OpenAI-compatible HTTP front end (aiohttp) over the engine thread.

The engine thread hands each step's tokens to the request's coroutine through the event loop
(``call_soon_threadsafe``), so one streamed event carries exactly the tokens of one engine step.
Detokenization happens here, off the engine thread.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import torch
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from tokenizers import Tokenizer

from specexp.reference.engine import Engine
from specexp.reference.request import RequestState as Sequence

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


class APIError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.kind, "code": self.status}}
        return web.json_response(body, status=self.status)


class Detokenizer:
    """Incremental decoding that holds text back while it ends in an incomplete UTF-8 character.

    Byte-level BPE needs no left context, so each call decodes only the tokens not yet turned into text.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.pending: list[int] = []

    def add(self, ids: list[int], final: bool) -> str:
        self.pending.extend(ids)
        text = self.tokenizer.decode(self.pending, skip_special_tokens=True)
        if text.endswith("\ufffd") and not final:
            return ""
        self.pending = []
        return text


@dataclass(frozen=True)
class ServerSettings:
    served_name: str
    max_model_len: int
    seed: int


def _number(body: dict[str, Any], key: str, default: Any, kind: type, low: float, high: float) -> Any:
    value = body.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise APIError(400, f"'{key}' must be a {kind.__name__}, got {value!r}")
    if not low <= value <= high:
        raise APIError(400, f"'{key}' must be in [{low}, {high}], got {value}")
    return kind(value)


class Server:
    def __init__(self, engine: Engine, tokenizer: Tokenizer, settings: ServerSettings) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.settings = settings
        self.vocab = engine.target.cfg.vocab_size
        self.seeds = torch.Generator().manual_seed(settings.seed)  # seeds unseeded requests' generators

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 2**20)
        app.add_routes(
            [
                web.get("/health", self.health),
                web.get("/v1/models", self.models),
                web.get("/metrics", self.metrics),
                web.post("/v1/completions", self.completions),
            ]
        )
        app.on_startup.append(lambda _: asyncio.to_thread(self.engine.start))
        app.on_shutdown.append(lambda _: asyncio.to_thread(self.engine.stop))
        return app

    async def health(self, request: web.Request) -> web.Response:
        alive = self.engine.thread.is_alive()
        return web.Response(status=200 if alive else 503, text="ok" if alive else "engine stopped")

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.settings.served_name, "object": "model", "created": 0, "owned_by": "specexp"}
        return web.json_response({"object": "list", "data": [card]})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.engine.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _prompt(self, prompt: Any) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt).ids
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = prompt
            if any(not 0 <= t < self.vocab for t in ids):
                raise APIError(400, f"prompt token ids must be in [0, {self.vocab})")
        else:
            raise APIError(400, "'prompt' must be a string or a list of token ids (one prompt per request)")
        if not ids:
            raise APIError(400, "the prompt is empty")
        return ids

    def _parse(self, body: Any) -> tuple[Sequence, dict[str, Any]]:
        """Validate a request into a Sequence (emit wired later) and the response options."""
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        name = body.get("model")
        if name is not None and name != self.settings.served_name:
            raise APIError(404, f"The model `{name}` does not exist.", "NotFoundError")
        unsupported = [k for k in ("n", "best_of") if body.get(k) not in (None, 1)]
        unsupported += [k for k in ("stop", "logprobs", "echo", "suffix") if body.get(k) not in (None, False, [], "")]
        if unsupported:
            raise APIError(400, f"not supported by the reference engine: {', '.join(unsupported)}")
        prompt = self._prompt(body.get("prompt"))
        max_tokens = _number(body, "max_tokens", DEFAULT_MAX_TOKENS, int, 1, self.settings.max_model_len)
        if len(prompt) + max_tokens > self.settings.max_model_len:
            raise APIError(
                400,
                f"this model's maximum context length is {self.settings.max_model_len} tokens; the request has "
                f"{len(prompt)} prompt tokens + max_tokens {max_tokens}",
            )
        temperature = _number(body, "temperature", 1.0, float, 0.0, 100.0)
        top_p = _number(body, "top_p", 1.0, float, 1e-9, 1.0)
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise APIError(400, f"'seed' must be an integer, got {seed!r}")
        generator = None
        if temperature > 0:
            seed = seed if seed is not None else int(torch.randint(2**62, (), generator=self.seeds))
            generator = torch.Generator().manual_seed(seed)
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise APIError(400, "'stream_options' must be an object")
        seq = Sequence(
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            ignore_eos=bool(body.get("ignore_eos", False)),
            emit=lambda tokens, finish: None,
            generator=generator,
        )
        return seq, {"stream": bool(body.get("stream", False)), "usage": bool(options.get("include_usage"))}

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return APIError(400, f"malformed JSON body: {exc}").response()
        try:
            seq, options = self._parse(body)
        except APIError as exc:
            return exc.response()
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[list[int], str | None]] = asyncio.Queue()
        seq.emit = lambda tokens, finish: loop.call_soon_threadsafe(events.put_nowait, (tokens, finish))
        self.engine.submit(seq)
        head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time())}
        head["model"] = self.settings.served_name
        detok = Detokenizer(self.tokenizer)
        try:
            if options["stream"]:
                return await self._stream(request, seq, events, detok, head, options["usage"])
            return await self._complete(seq, events, detok, head)
        finally:
            if seq.finish is None:
                self.engine.abort(seq)

    def _usage(self, seq: Sequence) -> dict[str, int]:
        completion = len(seq.tokens) - len(seq.prompt)
        return {
            "prompt_tokens": len(seq.prompt),
            "completion_tokens": completion,
            "total_tokens": len(seq.tokens),
        }

    async def _stream(
        self,
        request: web.Request,
        seq: Sequence,
        events: asyncio.Queue,
        detok: Detokenizer,
        head: dict[str, Any],
        usage: bool,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def send(obj: Any) -> None:
            await resp.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")

        while True:
            tokens, finish = await events.get()
            if finish == "error":
                await send({"error": {"message": "engine failure", "type": "InternalServerError", "code": 500}})
                break
            text = detok.add(tokens, finish is not None)
            choice = {"index": 0, "text": text, "token_ids": tokens, "logprobs": None, "finish_reason": finish}
            await send({**head, "choices": [choice]})
            if finish is not None:
                break
        if usage and seq.finish != "error":
            await send({**head, "choices": [], "usage": self._usage(seq)})
        await send(b"[DONE]")
        await resp.write_eof()
        return resp

    async def _complete(
        self, seq: Sequence, events: asyncio.Queue, detok: Detokenizer, head: dict[str, Any]
    ) -> web.Response:
        text, finish = [], None
        while finish is None:
            tokens, finish = await events.get()
            text.append(detok.add(tokens, finish is not None))
        if finish == "error":
            return APIError(500, "engine failure", "InternalServerError").response()
        choice = {
            "index": 0,
            "text": "".join(text),
            "token_ids": seq.tokens[len(seq.prompt) :],
            "logprobs": None,
            "finish_reason": finish,
        }
        return web.json_response({**head, "choices": [choice], "usage": self._usage(seq)})
