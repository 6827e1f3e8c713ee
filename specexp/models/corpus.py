"""The text every machine has: Python standard-library sources (code, comments, docstrings), split
into a training part (``tiny.CORPUS``, which also trains the tokenizer) and a held-out part that no
build ever trains on (the code workload the benchmark asks about text the models have not seen)."""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

from tokenizers import Tokenizer

# Modules outside CORPUS, kept out of every training run.
HELD_OUT = (
    "colorsys.py",
    "fnmatch.py",
    "glob.py",
    "graphlib.py",
    "numbers.py",
    "operator.py",
    "queue.py",
    "sched.py",
    "shlex.py",
    "tokenize.py",
)


def files(names: tuple[str, ...]) -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [stdlib / name for name in names if (stdlib / name).is_file()]


def texts(names: tuple[str, ...]) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in files(names)]


def digest(names: tuple[str, ...]) -> str:
    """Content hash of the named modules (names included), for a recipe's identity."""
    h = hashlib.sha256()
    for path in files(names):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def held_out_prompts(tokenizer: Tokenizer, count: int, length: int) -> list[list[int]]:
    """``count`` prompts of ``length`` tokens (BOS first), evenly spaced through the held-out text."""
    ids: list[int] = []
    for text in texts(HELD_OUT):
        ids += tokenizer.encode(text, add_special_tokens=False).ids
    bos = tokenizer.token_to_id("<s>")
    step = (len(ids) - length) // count
    return [[bos, *ids[i * step : i * step + length - 1]] for i in range(count)]
