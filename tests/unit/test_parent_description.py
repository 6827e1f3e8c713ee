"""The parent run's description fits MLflow's tag limit whole: the answer, then as many points as fit."""

from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

from specexp.report.verdict import METHODS_LEAD
from specexp.result import PointResult
from specexp.sweep.recorder import description


def point(batch: int, steps: int) -> PointResult:
    params = {"engine.name": "torch", "model.name": "tiny", "batch": batch, "drafter.name": "tiny"}
    params["drafter.num_steps"] = steps
    metrics = {"output_throughput": 1000.0 + batch, "output_throughput_ci95": 12.5, "windows": 8, "ttft_ms_p50": 9.5}
    return PointResult.from_params("ok", params, metrics=metrics)


def test_a_short_sweep_is_described_whole() -> None:
    text = description([point(1, 2), point(4, 2)], ["tiny pays at batch 1"], ["drafter.num_steps"])
    assert text.startswith("**tiny pays at batch 1**") and "more points" not in text
    assert text.count("\n|") == 4  # the header, its rule and both points


def test_a_long_sweep_keeps_the_answer_and_whole_rows_within_mlflows_limit() -> None:
    rows = [point(b, s) for b in range(1, 65) for s in range(1, 9)]
    words = [f"best at batch {b}: drafter.num_steps=2" for b in range(1, 65)]
    text = description(rows, words, ["drafter.num_steps"])
    assert len(text) <= MAX_TAG_VAL_LENGTH  # MLflow would cut it mid-row and warn on the console
    assert words[0] in text and "512 points, 0 failed" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert all(line.endswith("|") for line in table) and 2 < len(table) < 514
    assert text.rstrip().endswith(f"_… {512 - (len(table) - 2)} more points: summary.csv_")


def test_an_answer_longer_than_half_the_limit_points_to_verdict_txt() -> None:
    words = [f"line {i}: " + "x" * 200 for i in range(40)]
    text = description([point(1, 2)], words, [])
    assert len(text) <= MAX_TAG_VAL_LENGTH and "_… the whole verdict: verdict.txt_" in text
    assert "line 0: " in text and "line 39: " not in text


def test_the_count_follows_the_answer_and_the_methods_line_follows_the_count() -> None:
    """MLflow's run page shows the description's first lines: the answer and how many points, then
    (in italics, not as part of the answer) how the intervals were made, above the table they hold."""
    how = f"{METHODS_LEAD}speedups paired t over 8 window pairs (log scale), each 95% alone"
    text = description([point(1, 2), point(4, 2)], ["tiny pays at batch 1", how], ["drafter.num_steps"])
    assert text.startswith("**tiny pays at batch 1**  \n\n2 points, 0 failed\n\n_95% CI [lo, hi]: speedups paired")
    assert f"**{how}" not in text and text.index(how) < text.index("\n|")
