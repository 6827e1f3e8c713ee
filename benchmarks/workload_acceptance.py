"""How much does the workload change the answer? Acceptance and the break-even batch on the reference
engine (model=tiny, drafter=none vs tiny) for several workloads, through specexp itself.

Each workload is one sweep (``drafter=none,tiny batch=...``) in a scratch folder with its own MLflow
store; the script prints, per workload and batch, the speculative point's acceptance and its speedup
over the baseline, and the break-even batch (crossover_batch.tiny). Not a test: figures only.

    .venv/bin/python benchmarks/workload_acceptance.py [--batches 1,4,8] [--prompts 16] [--output-len 64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mlflow import MlflowClient

from specexp.report.analysis import apply
from specexp.report.fetch import fetch_sweep

REPO = Path(__file__).resolve().parent.parent
# Every workload at the same fixed output length, so only what is asked differs.
WORKLOADS = {
    "random ids (completions)": ["workload=random"],
    "builtin (completions)": ["workload=builtin"],
    "builtin (chat)": ["workload=builtin", "workload.api=chat"],
    "humaneval (chat)": ["workload=humaneval"],
}


def sweep(name: str, overrides: list[str], args: argparse.Namespace, scratch: Path) -> None:
    folder = scratch / "".join(c if c.isalnum() else "_" for c in name)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    argv = [
        sys.executable,
        "-m",
        "specexp",
        *overrides,
        "drafter=none,tiny",
        f"batch={args.batches}",
        f"workload.num_prompts={args.prompts}",
        f"workload.output_len={args.output_len}",
        "workload.ignore_eos=true",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={folder / 'multirun'}",
        "-m",
    ]
    folder.mkdir(parents=True)
    env = {**os.environ, "SPECEXP_OUTPUTS": str(REPO / "outputs")}  # the tiny model built once, shared
    proc = subprocess.run(argv, cwd=folder, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"{name}: sweep failed\n{proc.stderr[-2000:]}")
        return
    rows = fetch_sweep(MlflowClient(tracking_uri=uri), "specexp", "latest").rows
    analysis = apply(rows)
    speedups, cross = analysis.speedups, analysis.crossovers
    print(f"\n{name}: break-even batch {cross.get('crossover_batch.tiny', 'none (always or never wins)')}")
    print("  batch  input len  accept len  accept rate  speedup  output tok/s (none -> tiny)")
    base = {r.batch: r for r in rows if not r.speculative}
    for i, row in sorted(((i, r) for i, r in enumerate(rows) if r.speculative), key=lambda p: p[1].batch):
        m, b = row.metrics, base[row.batch].metrics
        print(
            f"  {row.batch:>5}  {m.get('input_len_mean', 0):>9.1f}  {m.get('accept_length', 0):>10.2f}"
            f"  {m.get('accept_rate', 0):>11.2f}  {speedups.get(i, {}).get('speedup', 0):>7.2f}"
            f"  {b['output_throughput']:.1f} -> {m['output_throughput']:.1f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="1,4,8", help="comma-separated batch sizes (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=16, help="measured conversations per point (default: %(default)s)")
    p.add_argument("--output-len", type=int, default=64, help="tokens per request (default: %(default)s)")
    p.add_argument("--only", help="run only the workloads whose name contains this")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="specexp-workloads-") as scratch:
        for name, overrides in WORKLOADS.items():
            if args.only is None or args.only in name:
                sweep(name, overrides, args, Path(scratch))


if __name__ == "__main__":
    main()
