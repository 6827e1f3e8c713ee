"""``--schedule`` on the reference engine's command line: parsed into a Schedule, refused in one line."""

from __future__ import annotations

import pytest

from specexp.depth_schedule import Schedule
from specexp.models.tiny import TinyPaths
from specexp.reference.__main__ import check, parser


def parse(tiny: TinyPaths, *extra: str):
    p = parser()
    argv = ["--model", str(tiny.target), "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "8000"]
    args = p.parse_args([*argv, "--max-running-requests", "4", "--num-continuous-decode-steps", "1", *extra])
    check(p, args)
    return args


def test_schedule_becomes_ranges(tiny: TinyPaths) -> None:
    args = parse(
        tiny, "--draft-model", str(tiny.draft), "--num-speculative-tokens", "3", "--schedule", "[[1,1,3],[2,4,1]]"
    )
    assert args.schedule == Schedule(((1, 1, 3), (2, 4, 1)))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--schedule", "[[1,4,2]]"], "--schedule needs --draft-model or --speculative-method"),
        (["--speculative-method", "ngram", "--num-speculative-tokens", "2", "--schedule", "[[2,4,2]]"], "not 1"),
        (["--speculative-method", "ngram", "--num-speculative-tokens", "2", "--schedule", "[[1,4"], "--schedule:"),
    ],
)
def test_bad_schedules_exit_2_naming_the_flag(tiny: TinyPaths, extra, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(tiny, *extra)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
