"""How long do the built-in models take to build here? Builds model=tiny (random) and model=tiny_trained
(trained on CPU: the training loops print their own progress) into a scratch folder and prints the
wall time of each. Not a test: figures only (CI builds each once per run, in tests/outputs).

    .venv/bin/python benchmarks/build_time.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from specexp.models.tiny import ensure_tiny
from specexp.models.tiny_trained import ensure_tiny_trained


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="specexp-build-") as scratch:
        for name, ensure in (("tiny", ensure_tiny), ("tiny_trained", ensure_tiny_trained)):
            t0 = time.monotonic()
            ensure(Path(scratch))
            print(f"model={name}: built in {time.monotonic() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
