"""``python -m specexp.report``: a sweep's report (table, verdict, plots) or two sweeps compared,
rebuilt from the MLflow store alone, so it works long after the sweep and on another machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlflow import MlflowClient

from specexp.report.analysis import apply
from specexp.report.compare import compare_report
from specexp.report.crossover_map import draw_map
from specexp.report.fetch import LATEST, Sweep, SweepNotFound, fetch_sweep, folder_record
from specexp.report.markdown import map_markdown, sweep_report
from specexp.report.plots import make_plots
from specexp.report.required import write as required_acceptance
from specexp.report.required_lookup import lines as needed_by_losers
from specexp.report.study import DEPTH_PLOT, best_per_batch, depth_plot
from specexp.report.summary import summary_rows, write_csv
from specexp.report.verdict import verdicts

EPILOG = """examples:
  python -m specexp.report                        # the newest sweep or study in outputs/mlflow.db
  python -m specexp.report 2024-01-01_10-00-00-1a2b3c   # a sweep id
  python -m specexp.report outputs/multirun/2024-01-01_10-00-00-1a2b3c   # a sweep's or study's folder
  python -m specexp.report --compare SWEEP_A SWEEP_B   # e.g. before/after an NCCL change
A sweep is named by its folder, its sweep id (tag specexp.sweep_id), its parent run's name or id, or
"latest". A folder's sweep.json says which store holds it, unless --tracking-uri says otherwise."""


DEFAULT_URI = "sqlite:///outputs/mlflow.db"
DEFAULT_EXPERIMENT = "specexp"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m specexp.report",
        description="Report on a specexp sweep from MLflow: a markdown table of every point, the verdict "
        "(where speculation stops paying off), and plots; or compare two sweeps point by point.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sweep", nargs="?", default=LATEST, help='the sweep to report on (default: "latest")')
    p.add_argument(
        "--compare", nargs=2, metavar=("A", "B"), help="compare two sweeps: ratios B/A of the headline metrics"
    )
    p.add_argument("--tracking-uri", help=f"MLflow store (default: a folder's own, else {DEFAULT_URI})")
    p.add_argument("--experiment", help=f"MLflow experiment (default: a folder's own, else {DEFAULT_EXPERIMENT})")
    p.add_argument("--out", type=Path, help="where to write the report (default: outputs/reports/<sweep>)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG and HTML plots")
    return p


def _missing_store(uri: str) -> str | None:
    """A sqlite path that does not exist: MLflow would silently create an empty store there."""
    path = uri.removeprefix("sqlite:///")
    return path if uri.startswith("sqlite:///") and not Path(path).exists() else None


def report(sweep: Sweep, out: Path, plots: bool) -> str:
    """Speedups and crossovers recomputed from the points, as the sweeper does at the end of a run."""
    rows = sweep.rows
    analysis = apply(rows)  # recomputed rather than trusting what a (maybe partial) run logged
    out.mkdir(parents=True, exist_ok=True)
    if rows:
        write_csv(out / "summary.csv", summary_rows(rows, sweep.settings))
    words = [*verdicts(rows, analysis), *needed_by_losers(rows)]  # a stored map: what a losing drafter needs
    if sweep.kind == "study":  # a study's answer is its best settings, not a crossover
        objective = sweep.params.get("study.objective", "output_throughput").split("@")[0]
        maximize = sweep.params.get("study.direction", "maximize").startswith("maximize")
        words += best_per_batch(rows, sweep.settings, objective, maximize)
        settings = sweep.settings
        depth = (
            depth_plot(rows, settings[0], objective, out / DEPTH_PLOT, settings[1:], maximize)
            if plots and settings
            else None
        )
        images = [depth] if depth else []  # the depth on the x axis: a study's points share each batch
    else:
        images = make_plots(rows, analysis.crossovers, out) if plots else []
        crossover_map = draw_map(rows, out / "crossover_map.png") if plots else None  # several context lengths
        images += [crossover_map] if crossover_map is not None else []
    title = f"{'Study' if sweep.kind == 'study' else 'Sweep'} {sweep.sweep_id}"
    if sweep.name and sweep.name != f"sweep-{sweep.sweep_id}":  # parents named by what they swept
        title += f": {sweep.name}"
    breakeven_map = map_markdown(rows)
    sections = [breakeven_map] if breakeven_map else []
    files, needs = required_acceptance(rows, out, plots)  # a synthetic-acceptance map: what a drafter needs
    images += [f for f in files if f.suffix == ".png"]
    if needs:
        sections.append("\n".join(["## Required acceptance length", *(f"- {line}" for line in needs)]))
    text = sweep_report(title, rows, words, images, sweep.settings, sections)
    (out / "report.md").write_text(text, encoding="utf-8")
    return text


def by_folder(args: argparse.Namespace) -> argparse.Namespace:
    """The sweeps named by folder turned into their ids, and the store and experiment (where the
    command line leaves them out) taken from the first such folder's record."""
    refs = args.compare or [args.sweep]
    records = [folder_record(ref) for ref in refs]
    tracking = next((r.get("tracking") or {} for r in records if r), {})
    refs = [r["sweep_id"] if r else ref for ref, r in zip(refs, records, strict=True)]
    return argparse.Namespace(
        **{
            **vars(args),
            **({"compare": refs} if args.compare else {"sweep": refs[0]}),
            "tracking_uri": args.tracking_uri or tracking.get("uri") or DEFAULT_URI,
            "experiment": args.experiment or tracking.get("experiment") or DEFAULT_EXPERIMENT,
        }
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = by_folder(parser().parse_args(argv))
    except SweepNotFound as exc:
        sys.exit(str(exc))
    if missing := _missing_store(args.tracking_uri):
        sys.exit(f"no MLflow store at {missing} (run a sweep first, or pass --tracking-uri)")
    mlflow = MlflowClient(tracking_uri=args.tracking_uri)
    try:
        if args.compare:
            a, b = (fetch_sweep(mlflow, args.experiment, ref) for ref in args.compare)
            out = args.out or Path("outputs/reports") / f"compare-{a.sweep_id}-vs-{b.sweep_id}"
            text = compare_report(a, b)
            out.mkdir(parents=True, exist_ok=True)
            (out / "compare.md").write_text(text, encoding="utf-8")
        else:
            sweep = fetch_sweep(mlflow, args.experiment, args.sweep)
            out = args.out or Path("outputs/reports") / sweep.sweep_id
            text = report(sweep, out, plots=not args.no_plots)
    except SweepNotFound as exc:
        sys.exit(str(exc))
    print(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
