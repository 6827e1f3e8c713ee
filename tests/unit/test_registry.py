"""The metric registry: one declaration per metric, the generated contract in step with it."""

import pytest

from specexp.metrics import docs
from specexp.metrics.registry import COUNT_KEYS, TABLE_KEYS, digits, header, lookup


def test_docs_metrics_md_is_generated_from_the_registry() -> None:
    assert docs.DOC_PATH.read_text(encoding="utf-8") == docs.render(), "run: python -m specexp.metrics.docs"


@pytest.mark.parametrize(
    ("key", "family"),
    [
        ("output_throughput", "output_throughput"),
        ("ttft_ms_p99", "ttft_ms"),
        ("decode_speed_p50", "decode_speed_p50"),
        ("decode_speed_lo", "decode_speed"),
        ("accept_rate_pos_3", "accept_rate_pos"),
        ("crossover_batch.tiny", "crossover_batch"),
        ("output_throughput_ci95", "output_throughput"),
        ("tpot_ms_p50_std", "tpot_ms"),
    ],
)
def test_concrete_keys_resolve_to_their_family(key: str, family: str) -> None:
    assert lookup(key).key == family


@pytest.mark.parametrize(
    "key", ["ttft_ms", "ttft_ms_p42", "decode_speed_p99", "decode_speed_mean", "accept_rate_pos", "bogus", "speedup.x"]
)
def test_keys_the_registry_does_not_define_are_unknown(key: str) -> None:
    assert lookup(key) is None


def test_headers_digits_and_counts() -> None:
    assert header("ttft_ms_p99") == "TTFT p99 ms"
    assert header("decode_speed") == "stream tok/s" and header("decode_speed_p50") == "stream tok/s p50"
    assert header("output_throughput") == "output tok/s"
    assert digits("tpot_ms_p50") == 2 and digits("output_throughput") == 1
    assert all(lookup(k) is not None for k in TABLE_KEYS)
    assert "requests_ok" in COUNT_KEYS and "output_throughput" not in COUNT_KEYS
