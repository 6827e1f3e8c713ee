"""Production-like traffic end to end on the reference engine: MT-Bench-style conversations through chat
with results per category that add up to the totals (the truth guard on random token ids is checked on
tests/e2e/test_single_run.py's run, speculation on the default random workload)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specexp.report.fetch import fetch_sweep

QUESTIONS = [
    {"question_id": i, "category": category, "turns": [f"{question} ({i})", "Now say it in one sentence."]}
    for i, (category, question) in enumerate(
        [
            ("writing", "Write a short poem about autumn leaves."),
            ("coding", "Write a Python function that reverses a string."),
            ("math", "What is the sum of the first ten odd numbers?"),
            ("writing", "Describe a quiet harbour at dawn."),
            ("coding", "Explain what a Python decorator does."),
            ("math", "Is 91 a prime number? Explain."),
        ]
    )
]
COUNTS = ("requests_ok", "output_tokens", "spec_verify_steps", "spec_draft_tokens", "spec_accepted_tokens")


@pytest.fixture
def mtbench(tmp_path: Path) -> Path:
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return path


def by_category(metrics: dict[str, float], key: str) -> dict[str, float]:
    return {k.split(".", 1)[1]: v for k, v in metrics.items() if k.startswith(key + ".")}


def test_per_category_results_add_up_to_the_totals(specexp, mtbench: Path) -> None:
    run = specexp(
        "workload=mtbench",
        f"workload.path={mtbench}",
        "workload.num_prompts=6",
        "workload.output_len=12",
        "measure.windows=1",  # one window: the counts below are one pass over the questions
        "drafter=none,tiny",
        "batch=2",
        "-m",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    sweep = fetch_sweep(run.mlflow, "specexp", "latest")
    assert len(sweep.rows) == 2 and all(r.ok for r in sweep.rows)
    for row in sweep.rows:
        m = row.metrics
        assert m["requests_ok"] == 12 and row.tags["specexp.workload_synthetic"] == "false"  # 6 questions x 2 turns
        assert set(by_category(m, "requests_ok")) == {"writing", "coding", "math"}
        for key in COUNTS[: 2 if not row.speculative else None]:
            assert sum(by_category(m, key).values()) == m[key], key  # per-request counts = the window's counters
        assert min(by_category(m, "output_throughput").values()) > 0
        for stat in ("mean", "p50", "p90"):
            assert m[f"input_len_{stat}"] > 0 and m[f"output_len_{stat}"] > 0
    (spec,) = [r for r in sweep.rows if r.speculative]
    lengths = by_category(spec.metrics, "accept_length")
    assert set(lengths) == {"writing", "coding", "math"} and all(1 <= v <= 5 for v in lengths.values())
    jobs = (run.workdir / "multirun").glob("*/results.json")
    (job,) = [p.parent for p in jobs if json.loads(p.read_text())["drafter"] == "tiny"]
    records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    second_turns = [r for r in records if r["turn"] == 1 and not (r["warmup"] or r["filler"])]
    assert len(second_turns) == 6 and all(r["category"] and r["error"] is None for r in second_turns)
    report = subprocess.run(
        [sys.executable, "-m", "specexp.report", "--tracking-uri", f"sqlite:///{run.workdir}/mlflow.db", "--no-plots"],
        cwd=run.workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    text = report.stdout
    assert "## Per category" in text and all(f"| {c} |" in text for c in ("writing", "coding", "math"))


def test_a_malformed_dataset_stops_before_any_server(specexp, tmp_path: Path) -> None:
    bad = tmp_path / "question.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n" + '{"question_id": 9, "turns": "not a list"}\n')
    run = specexp("workload=mtbench", f"workload.path={bad}")
    assert run.proc.returncode == 2
    assert f"invalid configuration: workload.path: {bad}:2: no 'turns' list" in run.proc.stderr
    assert run.runs() == []
