"""Conversations through the client against the live reference engine: every later turn is sent with
the model's own earlier answers in its history, and a failed turn ends its conversation."""

from __future__ import annotations

import asyncio

import aiohttp
from transformers import AutoTokenizer

from specexp.config import WorkloadConfig
from specexp.load.client import run_closed_loop
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape
from specexp.models.tiny import TinyPaths
from tests.reference.conftest import LiveServer

QUESTIONS = [
    Conversation(("Write a haiku about the sea.", "Now make it rhyme."), category="writing"),
    Conversation(("What is 12 times 7?", "Divide that by 3."), category="math"),
    Conversation(("Name three primes.", "Which is the largest?"), category="math"),
]


def send(server: LiveServer, items: list[Conversation], batch: int) -> list:
    shape = request_shape(WorkloadConfig(kind="builtin", api="chat", output_len=24), "tiny", {})

    async def go() -> list:
        async with aiohttp.ClientSession() as http:
            return await run_closed_loop(http, server.url, shape, items, batch, lambda e, r: None)

    return asyncio.run(go())


def test_later_turns_carry_the_models_own_answers(plain_server: LiveServer, tiny: TinyPaths) -> None:
    records = send(plain_server, QUESTIONS, batch=2)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny.target))
    assert [(r.conversation, r.turn, r.category) for r in records] == [
        (c, t, q.category) for c, q in enumerate(QUESTIONS) for t in (0, 1)
    ]
    for first, second in zip(records[::2], records[1::2], strict=True):
        assert first.ok and second.ok and first.text
        history = QUESTIONS[second.conversation].messages(1, [first.text])
        expected = tokenizer.apply_chat_template(history, add_generation_prompt=True, tokenize=True)["input_ids"]
        assert second.prompt_tokens == len(expected)  # the server saw exactly this history
        assert second.prompt_tokens > first.prompt_tokens + first.output_tokens


def test_a_failed_turn_ends_its_conversation(plain_server: LiveServer) -> None:
    too_long = Conversation(("word " * 4000, "never sent"), category="x")
    records = send(plain_server, [too_long, QUESTIONS[0]], batch=1)
    assert "HTTP 400" in records[0].error
    assert records[1].error.startswith("not sent: turn 0") and not records[1].chunks
    assert records[2].ok and records[3].ok
