"""Item 4: a resume survives a broken results.json (cut short by a crash or a full disk, or edited):
it is named, set aside like an unfinished attempt, and its point is measured again."""

import json

from tests.reliability.test_interrupts import summary_statuses


def test_resume_sets_a_truncated_results_json_aside_and_measures_its_point_again(ws) -> None:
    first = ws.run("drafter=none", "batch=1,2", "-m")
    assert first.returncode == 0, first.stderr[-3000:]
    (sweep,) = ws.sweeps()
    broken = sweep / "1" / "results.json"
    text = broken.read_text()
    broken.write_text(text[: len(text) // 2])

    again = ws.run("drafter=none", "batch=1,2", "resume=latest", "-m")
    said = again.stdout + again.stderr
    assert again.returncode == 0, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert f"{broken} cannot be read (JSONDecodeError" in said
    aside = sweep / "1.attempt1" / "results.json"
    assert aside.read_text() == text[: len(text) // 2], "the broken file was not kept aside"
    assert "1 point(s) finished ok already" in said
    assert summary_statuses(sweep) == ["ok", "ok"]
    remeasured = [json.loads(p.read_text()) for p in sweep.glob("*/results.json") if p.parent.name.isdigit()]
    assert sorted(r["batch"] for r in remeasured) == [1, 2]
