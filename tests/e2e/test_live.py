"""Live progress (specexp.live) as a user sees it on a terminal. With output in a file (one plain line
per point) it is checked on tests/e2e/test_steady_state.py's sweep, whose output goes to a pipe."""

import re

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def screen_lines(text: str) -> list[str]:
    """What a terminal showed, line by line (redraws included), escape sequences removed."""
    return [line.strip() for line in ESCAPES.sub("", text).replace("\r", "\n").splitlines() if line.strip()]


def test_a_sweep_on_a_terminal_shows_points_windows_servers_and_the_verdict(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=1,4", "workload.num_prompts=8", "-m", tty=True)
    assert run.proc.returncode == 0, run.proc.stdout[-3000:]
    lines = screen_lines(run.proc.stdout)
    for n, name in enumerate(["drafter=none batch=1", "drafter=tiny batch=1", "drafter=none batch=4"], start=1):
        assert f"point {n}/4 {name} · started" in lines
        ok = rf"point {n}/4 {name} · ok in \d+ s · [\d,.]+ \[[\d,.-]+, [\d,.]+\] tok/s · .*"
        assert any(re.fullmatch(ok, x) for x in lines)
    assert any(re.match(r"server ready in [\d.]+ s: torch serving tiny, drafter=tiny", x) for x in lines)
    # while a window runs: the point, its window of the windows asked for, its requests (and an ETA once
    # one is done: tests/unit/test_live_turns.py; a starved terminal may redraw no window after that)
    assert any(re.search(r"point \d/4 drafter=\w+ batch=\d · window [123]/3 .* \d/8 requests · ", x) for x in lines)
    assert any(x.startswith("verdict so far: tiny") for x in lines)  # after batch 1, before the sweep ends
    firmed = [x for x in lines if x.startswith("verdict so far:")]
    assert len(firmed) >= 1 and "batch 1" in firmed[0]
