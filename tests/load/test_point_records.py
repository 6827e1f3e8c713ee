"""A point's windows in process (specexp.point.windows) against a tiny aiohttp endpoint on a real
socket (tests.load.endpoint): the model its streams name, and the records it keeps when the server stops answering in
warm-up or at a window's closing counter read (issue 37)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from specexp import servers
from specexp.config import Config
from specexp.context import RunContext
from specexp.engines import adapter
from specexp.point.watch import EngineStalled
from specexp.point.windows import Collected, fold, measure_windows
from specexp.result import PointResult
from tests.conftest import FAST
from tests.load.endpoint import SERVED, Endpoint, serving

SETTINGS = [*FAST, "drafter=none", "batch=2", "measure.windows=1", "measure.warmup_windows=1", "engine.stall_s=1"]


def measure(cfg: Config, endpoint: Endpoint) -> tuple[Collected, BaseException | None]:
    """The point's windows against ``endpoint`` under its served name; what they collected,
    and what stopped them."""
    got = Collected()

    async def run(base: str) -> BaseException | None:
        srv = servers.Server("test", base, None, None, 0.0, None, served_name=SERVED)
        try:
            await measure_windows(cfg, RunContext(), adapter(cfg), srv, "test", got.windows, got.received)
        except EngineStalled as exc:
            return exc
        return None

    with serving(endpoint) as base:
        return got, asyncio.run(run(base))


@pytest.fixture
def cfg(make_config: Callable[..., Config]) -> Config:
    return make_config(*SETTINGS)


@pytest.mark.parametrize("named", ["tiny", "someone-else"])
def test_streams_that_name_another_model_tag_the_point_and_warn_once(
    cfg: Config, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    got, stopped = measure(cfg, Endpoint(model=named))
    assert stopped is None and got.windows
    result = PointResult(status="ok")
    with caplog.at_level(logging.WARNING, logger="specexp"):
        fold(cfg, result, got, launched=False)
    warnings = [r.getMessage() for r in caplog.records if "named model" in r.getMessage()]
    tags = result.to_json()["tags"]  # results.json and MLflow carry result.tags
    if named == "tiny":
        assert tags["specexp.model_mismatch"] == "false" and "specexp.streamed_model" not in tags and not warnings
    else:
        assert tags["specexp.model_mismatch"] == "true" and tags["specexp.streamed_model"] == "someone-else"
        assert len(warnings) == 1 and "someone-else" in warnings[0]


def test_a_point_that_ends_in_warm_up_keeps_its_finished_warm_up_records(cfg: Config) -> None:
    # workload.warmup=1 request, then a warm-up window of 4 at batch 2: the server answers 3, then hangs
    got, stopped = measure(cfg, Endpoint(answer=3))
    assert stopped is not None and "during a warm-up window" in str(stopped)
    finished = [r for r in got.records if r.ok]
    assert len(finished) == 3 and all(r.warmup and r.window is None for r in got.records)
    assert not got.windows  # and so in no metric


def test_a_window_whose_closing_counter_read_was_cut_says_so(cfg: Config) -> None:
    got, stopped = measure(cfg, Endpoint(counted=2))  # the read before the window answers, the one after hangs
    window = [r for r in got.records if not r.warmup]  # its 4 requests and the fillers that kept batch 2
    assert stopped is not None and not got.windows
    said = f"window 1's closing counter read was cut: its {len(window)} records are kept without metrics; "
    assert str(stopped).startswith(said) and "engine stalled" in str(stopped)
    assert sum(not r.filler for r in window) == 4 and all(r.window == 0 and (r.ok or r.filler) for r in window)
    assert [r.warmup for r in got.records] == [True] * 5 + [False] * len(window)  # the warm-up's first
