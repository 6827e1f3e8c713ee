"""What is sent: MT-Bench's history for a later turn, and each API's request body."""

from specexp.config import WorkloadConfig
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape

QUESTION = Conversation(("Write a haiku.", "Now make it rhyme."), category="writing")


def test_the_second_turn_carries_the_first_answer_as_mt_bench_sends_it() -> None:
    # FastChat llm_judge/gen_api_answer.py: user turn, the model's own answer verbatim, the next user turn.
    assert QUESTION.messages(1, ["Leaves fall\n"]) == [
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": "Leaves fall\n"},
        {"role": "user", "content": "Now make it rhyme."},
    ]
    assert QUESTION.messages(0, []) == [{"role": "user", "content": "Write a haiku."}]
    with_system = Conversation(("Hi",), system="Be brief.")
    assert with_system.messages(0, [])[0] == {"role": "system", "content": "Be brief."}


def test_chat_and_completions_bodies() -> None:
    workload = WorkloadConfig(kind="builtin", api="chat", output_len=32, ignore_eos=False)
    chat = request_shape(workload, "tiny", {"return_spec_tokens_details": True})
    assert chat.path == "/v1/chat/completions"
    body = chat.body(QUESTION, 1, ["A haiku."])
    assert body["messages"][-1] == {"role": "user", "content": "Now make it rhyme."} and "prompt" not in body
    assert body["max_tokens"] == 32 and body["ignore_eos"] is False and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["return_spec_tokens_details"] is True
    completions = request_shape(WorkloadConfig(), "tiny", {})
    ids = Conversation(([5, 6, 7],))
    assert completions.path == "/v1/completions"
    assert completions.body(ids, 0, [])["prompt"] == [5, 6, 7]
