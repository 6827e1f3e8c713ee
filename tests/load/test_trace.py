"""Replaying a trace (load=trace): Mooncake JSONL and Azure CSV read alike, sliced and scaled; each
request becomes a prompt of its length asking its output length; a malformed trace is one line naming
the file and line, at composition, before any server starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from specexp.config import ConfigError, LoadConfig, WorkloadConfig
from specexp.config.trace_file import read_trace
from specexp.load.send_plan import arrivals, phases, trace_items
from specexp.load.shape import request_shape

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"


def test_mooncake_times_from_the_first_request_in_seconds() -> None:
    trace = read_trace(str(TRACES / "mooncake.jsonl"))
    assert [r.at for r in trace] == [0.0, 0.5, 0.5, 3.0, 8.0]
    assert [(r.input_len, r.output_len, r.line) for r in trace][:2] == [(120, 30, 1), (8000, 12, 2)]
    assert trace[-1].line == 6  # the blank line is counted, so the line named is the file's


def test_azure_dates_and_a_scaled_slice() -> None:
    trace = read_trace(str(TRACES / "azure.csv"), time_scale=0.5, window_s=[1.0, 10.0], max_requests=1)
    assert len(trace) == 1 and trace[0].at == 0.0 and (trace[0].input_len, trace[0].output_len) == (396, 109)
    whole = read_trace(str(TRACES / "azure.csv"), time_scale=2.0)
    assert [round(r.at, 4) for r in whole] == [0.0, 8.6292, 8.6388, 40.0] and whole[-1].line == 5


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("unsorted.jsonl", "unsorted.jsonl:2: timestamp goes back in time"),
        ("negative.jsonl", "negative.jsonl:1: timestamp -5 is not a time >= 0"),
        ("missing.jsonl", "missing.jsonl:2: lacks output_length"),
        ("nonnumeric.csv", "nonnumeric.csv:3: ContextTokens 'many' is not a whole number"),
        ("nocolumn.csv", "nocolumn.csv:1: the header lacks GeneratedTokens"),
    ],
)
def test_a_malformed_trace_names_its_file_and_line(name: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        LoadConfig(kind="rate", path=str(TRACES / name))
    assert raised.value.key == "load.path" and said in str(raised.value) and "\n" not in str(raised.value)


def test_an_empty_slice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"mooncake.jsonl: no request in load.window_s \[100, 200\)"):
        LoadConfig(kind="rate", path=str(TRACES / "mooncake.jsonl"), window_s=[100, 200])


def test_the_load_replays_the_trace_in_phases_with_its_lengths() -> None:
    load = LoadConfig(kind="rate", path=str(TRACES / "mooncake.jsonl"), phase_s=3.0)
    assert load.rate == pytest.approx(4 / 8.0)  # the slice's mean rate sizes the warm-up
    assert arrivals(load, 0, (0,)) == [0.0, 0.5, 0.5, 3.0, 8.0]
    assert phases(load) == [0.0, 3.0, 6.0, 9.0]  # the arrival at 3.0 opens the second phase
    w = WorkloadConfig(input_len=1024, output_len=256)
    items = trace_items(w, load.trace(), "sweep/job/window0")
    assert [len(c.turns[0]) for c in items] == [120, 1024, 64, 33, 10]  # cut at workload.input_len
    assert [c.max_tokens for c in items] == [30, 12, 1, 256, 20]  # at most workload.output_len
    assert dict(items[3].extra) == {"trace_line": 5, "input_asked": 33, "input_sent": 33, "output_asked": 400}
    body = request_shape(w, "m", {}).body(items[0], 0, [])
    assert body["max_tokens"] == 30 and body["ignore_eos"] is True


def test_composition_refuses_a_malformed_trace(make_config) -> None:
    with pytest.raises(ConfigError, match=r"unsorted\.jsonl:2"):
        make_config("load=trace", f"load.path={TRACES / 'unsorted.jsonl'}", "load.max_concurrency=4")
    cfg = make_config("load=trace", f"load.path={TRACES / 'azure.csv'}", "load.max_concurrency=4", "load.phase_s=20")
    assert phases(cfg.load) == [0.0, 20.0, 40.0] and cfg.streams == 1
