"""Live progress (specexp.live) as a user sees it: on a terminal, and with output in a file."""

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
        assert any(re.fullmatch(rf"point {n}/4 {name} · ok in \d+ s · [\d,.]+ ± [\d,.]+ tok/s · .*", x) for x in lines)
    assert any(re.match(r"server ready in [\d.]+ s: torch serving tiny, drafter=tiny", x) for x in lines)
    # while a window runs: the point, its window of the windows asked for, its requests, an ETA
    assert any(
        re.search(r"point \d/4 drafter=\w+ batch=\d · window [123]/3 .* \d/8 requests · .* ETA \d+ s", x) for x in lines
    )
    assert any(x.startswith("verdict so far: tiny") for x in lines)  # after batch 1, before the sweep ends
    firmed = [x for x in lines if x.startswith("verdict so far:")]
    assert len(firmed) >= 1 and "batch 1" in firmed[0]


def test_output_to_a_file_gets_one_plain_line_per_point(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=1", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    shown = [x for x in run.proc.stderr.splitlines() if x.startswith("point ")]
    # the arms take turns: either may end first
    assert sorted(x.split(" · ")[0] for x in shown) == ["point 1/2 drafter=none", "point 2/2 drafter=tiny"]
    assert all(" · ok in " in x for x in shown)
    assert (
        "\x1b[" not in run.proc.stderr
        and "window 1/3" not in run.proc.stderr
        and "verdict so far" not in run.proc.stderr
    )
