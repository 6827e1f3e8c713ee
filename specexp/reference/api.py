"""The OpenAI-compatible HTTP front end (aiohttp) over the engine thread.

The engine thread hands each step's tokens to the request's coroutine through the event loop
(``call_soon_threadsafe``), so one streamed event carries exactly the tokens of one engine step.
Detokenization happens here, off the engine thread.

``/v1/completions`` takes a prompt (text or token ids); ``/v1/chat/completions`` takes OpenAI messages
and applies the model's chat template (specexp.reference.chat). Both stream the same events apart
from the choice's shape. Per-request acceptance, asked with SGLang's ``return_spec_tokens_details``,
comes in SGLang's shape (one ``{"choices": [], "sglext": {"spec_tokens_details": ...}}`` event before
the usage event): ``spec_verify_ct`` counts this request's steps that verified drafts, exactly as the
``spec_decode_num_drafts`` counter does (and as SGLang counts: prefill excluded), and
``spec_num_correct_drafts`` its accepted drafts, and ``spec_accepted_per_pos`` (specexp's own field)
those by draft position, so the requests' counts add up to the counters' deltas.
Each finished request is observed in vLLM's latency histograms (specexp.reference.prometheus).
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

from specexp.reference.chat import ChatError, ChatTemplate
from specexp.reference.request import RequestState
from specexp.reference.scheduler import BatchEngine

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions; chat defaults to the rest of the context


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
class Endpoint:
    """What /v1/completions and /v1/chat/completions name and shape differently."""

    id_prefix: str
    object: str  # the whole (non-streamed) response
    chunk_object: str  # each streamed event
    chat: bool

    def delta(self, text: str, tokens: list[int], finish: str | None) -> dict[str, Any]:
        body = {"delta": {"content": text}} if self.chat else {"text": text}
        return {"index": 0, **body, "token_ids": tokens, "logprobs": None, "finish_reason": finish}

    def whole(self, text: str, tokens: list[int], finish: str | None) -> dict[str, Any]:
        body = {"message": {"role": "assistant", "content": text}} if self.chat else {"text": text}
        return {"index": 0, **body, "token_ids": tokens, "logprobs": None, "finish_reason": finish}


COMPLETIONS = Endpoint("cmpl", "text_completion", "text_completion", chat=False)
CHAT = Endpoint("chatcmpl", "chat.completion", "chat.completion.chunk", chat=True)
# Request keys each endpoint refuses unless left at their defaults.
_DEFAULTS = {"n": (None, 1), "best_of": (None, 1)}
UNSUPPORTED = {
    COMPLETIONS: ("n", "best_of", "stop", "logprobs", "echo", "suffix"),
    CHAT: ("n", "stop", "logprobs", "top_logprobs", "tools", "response_format", "continue_final_message"),
}


def accepted_at(positions: list[int], step: list[int]) -> None:
    """Count one step's accepted drafts by position: a step of n tokens accepted drafts 0 … n − 2 (the
    engine's own rule for its per-position counter, so the sums agree)."""
    for i in range(len(step) - 1):
        positions[i] += 1


@dataclass
class Options:
    stream: bool
    usage: bool
    prompt_ids: bool  # vLLM's return_token_ids: the prompt's ids in the first event
    spec_details: bool  # SGLang's return_spec_tokens_details


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


class ApiServer:
    def __init__(
        self, engine: BatchEngine, tokenizer: Tokenizer, settings: ServerSettings, chat: ChatTemplate | None = None
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.settings = settings
        self.chat = chat
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
                web.post("/v1/chat/completions", self.chat_completions),
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

    def _chat_prompt(self, body: dict[str, Any]) -> list[int]:
        if self.chat is None:
            raise APIError(400, "the model has no chat template (tokenizer_config.json chat_template)")
        try:
            text = self.chat.render(body.get("messages"), bool(body.get("add_generation_prompt", True)))
        except ChatError as exc:
            raise APIError(400, str(exc)) from None
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids  # the template writes them
        if not ids:
            raise APIError(400, "the rendered prompt is empty")
        return ids

    def _parse(self, body: Any, endpoint: Endpoint) -> tuple[RequestState, Options]:
        """Validate a request into a RequestState (emit wired later) and the response options."""
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        name = body.get("model")
        if name is not None and name != self.settings.served_name:
            raise APIError(404, f"The model `{name}` does not exist.", "NotFoundError")
        unsupported = [k for k in UNSUPPORTED[endpoint] if body.get(k) not in _DEFAULTS.get(k, (None, False, [], ""))]
        if unsupported:
            raise APIError(400, f"not supported by the reference engine: {', '.join(unsupported)}")
        prompt = self._chat_prompt(body) if endpoint.chat else self._prompt(body.get("prompt"))
        chat_cap = endpoint.chat and body.get("max_completion_tokens") is not None
        key = "max_completion_tokens" if chat_cap else "max_tokens"
        default = max(self.settings.max_model_len - len(prompt), 1) if endpoint.chat else DEFAULT_MAX_TOKENS
        max_tokens = _number(body, key, default, int, 1, self.settings.max_model_len)
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
        seq = RequestState(
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            ignore_eos=bool(body.get("ignore_eos", False)),
            emit=lambda tokens, finish: None,
            generator=generator,
        )
        return seq, Options(
            stream=bool(body.get("stream", False)),
            usage=bool(options.get("include_usage")),
            prompt_ids=bool(body.get("return_token_ids")),
            spec_details=bool(body.get("return_spec_tokens_details")),
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, COMPLETIONS)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, CHAT)

    async def _serve(self, request: web.Request, endpoint: Endpoint) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return APIError(400, f"malformed JSON body: {exc}").response()
        try:
            seq, options = self._parse(body, endpoint)
        except APIError as exc:
            return exc.response()
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[list[int], str | None, float]] = asyncio.Queue()
        seq.emit = lambda tokens, finish: loop.call_soon_threadsafe(
            events.put_nowait, (tokens, finish, time.monotonic())
        )
        seq.arrival = time.monotonic()
        self.engine.submit(seq)
        head = {"id": f"{endpoint.id_prefix}-{uuid.uuid4().hex}", "created": int(time.time())}
        head["model"] = self.settings.served_name
        detok = Detokenizer(self.tokenizer)
        try:
            if options.stream:
                return await self._stream(request, endpoint, seq, events, detok, head, options)
            return await self._complete(endpoint, seq, events, detok, head, options)
        finally:
            if seq.finish is None:
                self.engine.abort(seq)

    def _usage(self, seq: RequestState) -> dict[str, int]:
        completion = len(seq.tokens) - len(seq.prompt)
        return {
            "prompt_tokens": len(seq.prompt),
            "completion_tokens": completion,
            "total_tokens": len(seq.tokens),
        }

    def _observe(self, seq: RequestState, first: float, last: float) -> None:
        admitted = seq.admitted if seq.admitted is not None else seq.arrival
        self.engine.metrics.finished(seq.arrival, admitted, first, last, len(seq.tokens) - len(seq.prompt))

    def _spec_details(self, seq: RequestState, steps: int, positions: list[int]) -> dict[str, Any]:
        """SGLang's per-request fields over this request's ``steps`` engine steps, prefill included (each
        emitted the accepted drafts plus one token, so accepted = completion - steps)."""
        completion = len(seq.tokens) - len(seq.prompt)
        correct = completion - steps
        details = {
            "spec_verify_ct": seq.drafts,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": seq.drafted,
            "spec_accept_length": completion / seq.drafts if seq.drafts else 0.0,  # SGLang's own ratio
            "spec_accepted_per_pos": positions,  # specexp's own: accepted at draft position i
            "spec_accept_rate": correct / seq.drafted if seq.drafted else 0.0,
        }
        return {"spec_tokens_details": details}

    async def _stream(
        self,
        request: web.Request,
        endpoint: Endpoint,
        seq: RequestState,
        events: asyncio.Queue,
        detok: Detokenizer,
        head: dict[str, Any],
        options: Options,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        head = {**head, "object": endpoint.chunk_object}
        first = {"prompt_token_ids": seq.prompt} if options.prompt_ids else {}

        async def send(obj: Any) -> None:
            await resp.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")

        if endpoint.chat:  # the assistant's role opens the message, as OpenAI and vLLM stream it
            opening = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            await send({**head, "choices": [opening], **first})
            first = {}
        steps, started, positions = 0, 0.0, [0] * self.engine.k
        while True:
            tokens, finish, at = await events.get()
            if finish == "error":
                await send({"error": {"message": "engine failure", "type": "InternalServerError", "code": 500}})
                break
            steps += 1
            accepted_at(positions, tokens)
            started = started or at
            if finish is not None:  # observed before the client can see its last token
                self._observe(seq, started, at)
            text = detok.add(tokens, finish is not None)
            await send({**head, "choices": [endpoint.delta(text, tokens, finish)], **first})
            first = {}
            if finish is not None:
                break
        if seq.finish != "error":
            if options.spec_details:
                await send({**head, "choices": [], "sglext": self._spec_details(seq, steps, positions)})
            if options.usage:
                await send({**head, "choices": [], "usage": self._usage(seq)})
        await send(b"[DONE]")
        await resp.write_eof()
        return resp

    async def _complete(
        self,
        endpoint: Endpoint,
        seq: RequestState,
        events: asyncio.Queue,
        detok: Detokenizer,
        head: dict[str, Any],
        options: Options,
    ) -> web.Response:
        text, finish, steps, started, at, positions = [], None, 0, 0.0, 0.0, [0] * self.engine.k
        while finish is None:
            tokens, finish, at = await events.get()
            steps += 1
            accepted_at(positions, tokens)
            started = started or at
            text.append(detok.add(tokens, finish is not None))
        if finish == "error":
            return APIError(500, "engine failure", "InternalServerError").response()
        self._observe(seq, started, at)
        choice = endpoint.whole("".join(text), seq.tokens[len(seq.prompt) :], finish)
        body = {**head, "object": endpoint.object, "choices": [choice], "usage": self._usage(seq)}
        if options.prompt_ids:
            body["prompt_token_ids"] = seq.prompt
        if options.spec_details:
            body["sglext"] = self._spec_details(seq, steps, positions)
        return web.json_response(body)
