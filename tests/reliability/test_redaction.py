"""Item 4: ordinary parameters are always visible; secret values are written nowhere.

A canary secret goes in as an engine environment entry with a secret-like name (``HF_TOKEN``) and
as the variable named by ``engine.api_key_env``; afterwards no file under the workspace, nothing
in the MLflow store and nothing on the console holds it.
"""

import csv
import json
from pathlib import Path

from tests.reliability.conftest import foreign_server
from tests.support.servers import free_port

CANARY = "hf_canary_5e1f0c2d9b7a"
KEY_CANARY = "sk-canary-0a9b8c7d6e5f"


def files_holding(root, needle: str) -> list[str]:
    """Every file under ``root`` (links to the shared model not followed) whose bytes hold ``needle``."""
    hits = []
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        if needle.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


def test_ordinary_parameters_are_visible_and_secret_values_are_nowhere(ws) -> None:
    run = ws.run(
        "drafter=tiny",
        "drafter.num_draft_tokens=5",
        f"+engine.env.HF_TOKEN={CANARY}",
        "+engine.env.TOKENIZERS_PARALLELISM='false'",
        "batch=1",
        "baseline=off",  # the drafter's point alone: a baseline point would add nothing to look through
        "-m",
        timeout=400,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (child,) = [r for r in ws.runs() if r.data.tags.get("specexp.role") != "parent"]
    params = child.data.params
    assert params["drafter.name"] == "tiny"
    assert params["drafter.num_draft_tokens"] == "5"
    assert params["workload.token_range"] == "[100, 1000]"
    assert params["model.tokenizer"] == "None"
    assert params["engine.env.TOKENIZERS_PARALLELISM"] == "false"
    assert params["engine.env.HF_TOKEN"] == "***"
    (sweep,) = ws.sweeps()
    with (sweep / "summary.csv").open() as f:
        (row,) = [r for r in csv.DictReader(f) if r["drafter.name"] == "tiny"]
    assert row["drafter.num_draft_tokens"] == "5"
    job = Path(row["job_dir"])
    results = json.loads((job / "results.json").read_text())
    assert results["params"]["drafter.num_draft_tokens"] == 5
    server = json.loads((job / "server.json").read_text())
    assert server["env"]["HF_TOKEN"] == "***" and server["env"]["TOKENIZERS_PARALLELISM"] == "false"
    assert files_holding(ws.root, CANARY) == []  # outputs/ (run folders, logs, mlflow.db, artifacts)
    assert CANARY not in run.stdout + run.stderr


def test_the_api_key_of_an_external_endpoint_is_nowhere(ws) -> None:
    port = free_port()
    with foreign_server(ws, port, served_name="remote") as url:
        run = ws.run(
            "engine=external",
            f"engine.url={url}",
            "engine.model_name=remote",
            "engine.api_key_env=SPECEXP_CANARY_KEY",
            "drafter=none",
            "batch=1",
            timeout=300,
            SPECEXP_CANARY_KEY=KEY_CANARY,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    (logged,) = ws.runs()
    assert logged.data.params["engine.api_key_env"] == "SPECEXP_CANARY_KEY"  # the name is visible
    assert files_holding(ws.root, KEY_CANARY) == []
    assert KEY_CANARY not in run.stdout + run.stderr
