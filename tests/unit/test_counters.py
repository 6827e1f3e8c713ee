"""Spec-decode counters parsed with prometheus_client from real vLLM captures."""

import pytest

from specexp.engines import counters
from tests.conftest import SHARED

FIXTURES = SHARED / "fixtures" / "vllm"


def scrape(name: str) -> dict[str, float]:
    return counters.parse((FIXTURES / name).read_text(), "vllm:")


def test_plain_server_has_no_speculation() -> None:
    plain = scrape("metrics_plain.txt")
    assert counters.acceptance(plain, plain) == {}
    assert plain["generation_tokens"] > 0


def test_ngram_capture_by_hand() -> None:
    m = counters.acceptance({}, scrape("metrics_ngram.txt"))
    assert m["spec_draft_tokens"] == 188 and m["spec_accepted_tokens"] == 157 and m["spec_verify_steps"] == 70
    assert m["accept_rate"] == pytest.approx(157 / 188)
    assert m["accept_length"] == pytest.approx(1 + 157 / 70)
    assert m["accept_rate_pos_0"] == pytest.approx(62 / 70)
    assert m["accept_rate_pos_2"] == pytest.approx(45 / 70)


def test_deltas_exclude_what_came_before_the_window() -> None:
    after = scrape("metrics_ngram.txt")
    before = {k: v / 2 for k, v in after.items()}
    m = counters.acceptance(before, after)
    assert m["spec_accepted_tokens"] == pytest.approx(157 / 2)
    assert m["accept_rate"] == pytest.approx(157 / 188)


def test_created_samples_are_skipped() -> None:
    eagle = scrape("metrics_eagle3.txt")
    assert eagle["spec_decode_num_drafts"] == 157 and eagle["spec_decode_num_draft_tokens"] == 471
    m = counters.acceptance({}, eagle)
    assert m["accept_rate"] == 0.0 and m["accept_length"] == 1.0
