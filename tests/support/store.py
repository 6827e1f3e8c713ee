"""An empty MLflow sqlite store made once per test session and copied where a test's specexp run
will log: creating a store runs MLflow's migrations (1.3 s idle, up to 9.5 s under load) in every
process that creates one, copying a migrated one takes milliseconds and MLflow opens it as it is."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from mlflow import MlflowClient


def make_template(folder: Path) -> Path:
    """A migrated store in ``folder`` holding no experiment at all: MLflow adds its Default experiment
    (artifacts under the opening process's ./mlruns) when a copy is first opened, as in a new store."""
    db = folder / "mlflow-template.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()  # creates the tables
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM experiments")
    return db


def place(template: Path, db: Path) -> Path:
    """``template`` copied to ``db`` (its folder made); a store already there is kept."""
    db.parent.mkdir(parents=True, exist_ok=True)
    if not db.exists():
        shutil.copyfile(template, db)
    return db


def logged_runs(db: Path) -> int:
    """How many runs the sqlite store ``db`` holds, read without MLflow (so nothing creates a store
    just to look): 0 for a missing file."""
    if not db.exists():
        return 0
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
