"""Per-category metrics from records: counts add up to the totals, throughputs average to the point's."""

import pytest

from specexp.engines.sglang.spec_counts import per_request_counts
from specexp.metrics.categories import category_metrics, label
from specexp.metrics.requests import compute
from specexp.records import Chunk, RequestRecord


def record(i: int, category: str | None, send: float, end: float, tokens: int, steps: int, drafted: int):
    extra = {"spec_verify_ct": steps, "spec_num_correct_drafts": tokens - steps, "spec_num_proposed_drafts": drafted}
    chunks = [Chunk(send + 0.01, 1), Chunk(end, tokens - 1)]
    return RequestRecord(i, send=send, end=end, chunks=chunks, completion_tokens=tokens, extra=extra, category=category)


RECORDS = [
    record(0, "math", 0.0, 1.0, 20, 8, 24),
    record(1, "code/py", 0.0, 2.0, 30, 10, 30),
    record(2, "math", 1.0, 3.0, 10, 6, 18),
    record(3, "code/py", 2.0, 3.0, 16, 4, 12),
]


def test_counts_add_up_and_throughputs_average_to_the_total() -> None:
    m = category_metrics(RECORDS, per_request_counts)
    total = compute(RECORDS)
    assert m["requests_ok.math"] + m["requests_ok.code/py"] == total["requests_ok"] == 4
    assert m["output_tokens.math"] + m["output_tokens.code/py"] == total["output_tokens"] == 76
    assert m["spec_verify_steps.math"] + m["spec_verify_steps.code/py"] == 28
    assert m["accept_length.math"] == pytest.approx(30 / 14) and m["accept_rate.math"] == pytest.approx(16 / 42)
    in_flight = {"math": 1.0 + 2.0, "code/py": 2.0 + 1.0}
    weighted = sum(m[f"output_throughput.{c}"] * t for c, t in in_flight.items()) / sum(in_flight.values())
    assert weighted == pytest.approx(total["output_throughput"])


def test_no_categories_no_keys_and_labels_are_key_safe() -> None:
    assert category_metrics([record(0, None, 0.0, 1.0, 5, 2, 6)], per_request_counts) == {}
    assert label("Q&A (open)") == "Q_A _open_" and label("") == "_"
