"""The MLflow UI as a person sees it: a real sweep in a real store, `mlflow server`, headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specexp import tracking
from tests.conftest import needs
from tests.support.servers import free_port, mlflow_server
from tests.support.store import place

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.browser,
    needs(CHROMIUM, "Debian's chromium", "apt-get install chromium chromium-driver"),
    needs(CHROMEDRIVER, "Debian's chromedriver", "apt-get install chromium-driver"),
]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, shared_outputs: Path, mlflow_template: Path) -> Path:
    """A real three-batch envelope on the reference engine, recorded in its own sqlite store."""
    from tests.conftest import FAST, run_outputs

    work = tmp_path_factory.mktemp("sweep")
    place(mlflow_template, work / "mlflow.db")
    argv = [sys.executable, "-m", "specexp", *FAST, "drafter=none,tiny", "batch=1,2,4"]
    argv += [f"tracking.uri=sqlite:///{work / 'mlflow.db'}", f"hydra.sweep.dir={work}/multirun", "-m"]
    env = {**os.environ, "SPECEXP_OUTPUTS": str(run_outputs(work, shared_outputs))}
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (work / "console.txt").write_text(proc.stderr)  # what it printed: its links
    return work


@pytest.fixture(scope="module")
def mlflow_url(sweep: Path) -> Iterator[str]:
    """`mlflow server` on the sweep's store, stopped at teardown."""
    with mlflow_server(sweep, free_port(), store=sweep / "mlflow.db") as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for_text(driver, *texts: str, timeout: float = 60) -> str:
    """The page's visible text once it shows every one of ``texts``."""
    deadline = time.monotonic() + timeout
    while True:
        body = driver.find_element("tag name", "body").text
        if all(t in body for t in texts) or time.monotonic() > deadline:
            return body
        time.sleep(0.5)


def screenshot(driver, name: str, tmp_path: Path) -> Path:
    """Saved beside the test, and where SPECEXP_SCREENSHOTS points (to look at them)."""
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    if out := os.environ.get("SPECEXP_SCREENSHOTS"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / path.name)
    return path


def test_experiment_and_parent_run_read_like_the_sweep(sweep, mlflow_url, browser, tmp_path) -> None:
    from mlflow import MlflowClient

    store = MlflowClient(f"sqlite:///{sweep / 'mlflow.db'}")
    exp = store.get_experiment_by_name("specexp")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = store.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert parent.info.run_name == "torch/tiny: drafter none,tiny × batch 1–4"  # the name shortens

    # The link specexp prints: MLflow 3.17's UI starts on GenAI unless told (or a click remembered it).
    browser.get(f"{mlflow_url}/{tracking.ui_path(exp.experiment_id)}")
    page = wait_for_text(browser, parent.info.run_name, "Run Name")
    screenshot(browser, "experiment", tmp_path)
    assert parent.info.run_name in page and "Run Name" in page, page[:2000]  # the runs table, not traces
    assert "No data available" not in page

    browser.get(f"{mlflow_url}/{tracking.ui_path(exp.experiment_id, parent.info.run_id)}")
    page = wait_for_text(browser, "6 points, 0 failed", "drafter=tiny batch=4")
    screenshot(browser, "parent-run", tmp_path)
    verdict = ("tiny pays", "tiny loses", "tiny: no measurable difference")
    assert any(v in page for v in verdict), page[:3000]  # the verdict, in the run's description
    assert "6 points, 0 failed" in page
    for name in ("drafter=none batch=1", "drafter=none batch=4", "drafter=tiny batch=1", "drafter=tiny batch=4"):
        assert name in page, (name, page[:3000])  # its points, listed as child runs
    # the parameters list the swept values exactly, where the name shortens them to a range
    assert parent.data.params["swept.batch"] == "1,2,4"
    page = wait_for_text(browser, "swept.batch", "1,2,4")
    screenshot(browser, "parent-params", tmp_path)
    assert "swept.batch" in page and "1,2,4" in page and "1–4" not in page.split("swept.batch", 1)[1][:40], page[:3000]


def js_number(value: float) -> str:
    """A metric as MLflow's runs table prints it (JavaScript's shortest round-trip form)."""
    return repr(value).removesuffix(".0")


HEADERS = "return [...document.querySelectorAll('.ag-header-cell')].map(e => e.getAttribute('col-id'))"
CELLS = (
    "const rows = {};"
    "for (const row of document.querySelectorAll('.ag-row')) {"
    "  const at = rows[row.getAttribute('row-index')] ??= {};"
    "  for (const cell of row.querySelectorAll('.ag-cell')) at[cell.getAttribute('col-id')] = cell.innerText;"
    "}"
    "return rows;"
)
# The grid's horizontal scroller: set to ``arguments[0]`` px (its scroll event redraws the columns there);
# returns how far it can go and how wide its view is.
SCROLL = (
    "const s = document.querySelector('.ag-body-horizontal-scroll-viewport');"
    "if (!s) return [0, 1];"
    "s.scrollLeft = arguments[0]; s.dispatchEvent(new Event('scroll'));"
    "return [s.scrollWidth - s.clientWidth, s.clientWidth];"
)


def read_grid(driver) -> tuple[set[str], dict[str, dict[str, str]]]:
    """The runs table's column ids and its rows by run name ({column id: text}), gathered across its
    width: the grid draws only the columns in view (how many fit depends on the browser's fonts and
    window), so it is scrolled sideways a step at a time and what each step drew is joined. A row's
    cells are split between the grid's pinned and scrolling parts, joined by their row index."""
    headers: set[str] = set()
    rows: dict[str, dict[str, str]] = {}
    left, (end, view) = 0, driver.execute_script(SCROLL, 0)
    while True:
        time.sleep(0.3)
        headers |= set(driver.execute_script(HEADERS))
        for index, cells in driver.execute_script(CELLS).items():
            rows.setdefault(index, {}).update(cells)
        if left >= end:
            break
        left = min(end, left + max(view // 2, 1))
        driver.execute_script(SCROLL, left)
    driver.execute_script(SCROLL, 0)
    named = {r["attributes.`Run Name`"].splitlines()[-1]: r for r in rows.values() if "attributes.`Run Name`" in r}
    return headers, named


def wait_for_columns(driver, wanted: set[str], timeout: float = 30) -> tuple[set[str], dict[str, dict[str, str]]]:
    """``read_grid`` once its columns hold ``wanted`` (the grid draws columns late), or at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        headers, rows = read_grid(driver)
        if wanted <= headers or time.monotonic() > deadline:
            return headers, rows
        time.sleep(0.5)


def test_the_points_link_a_sweep_prints_shows_their_metrics_and_swept_values_as_columns(
    sweep, mlflow_url, browser, tmp_path
) -> None:
    from mlflow import MlflowClient

    store = MlflowClient(f"sqlite:///{sweep / 'mlflow.db'}")
    exp = store.get_experiment_by_name("specexp")
    points = [r for r in store.search_runs([exp.experiment_id]) if r.data.tags.get("specexp.role") == "point"]
    assert len(points) == 6

    printed = " ".join((sweep / "console.txt").read_text().split())
    link = re.search(r"its points, their metrics as columns: (http://127\.0\.0\.1:5000/\S+)", printed)
    assert link, printed[-2000:]  # on the port of the `mlflow ui` it prints (tracking.ui_port); ours is free
    swept = {"params.`batch`", "params.`drafter.name`"}
    # Wide, so that most columns are drawn at once; headers and rows are read before the window shrinks
    # back (read after it, the grid had already dropped the params on CI's machine).
    browser.set_window_size(2600, 1000)
    try:
        browser.get(link.group(1).replace("http://127.0.0.1:5000", mlflow_url))
        page = wait_for_text(browser, *(p.info.run_name for p in points), "output_throughput", "6 matching runs")
        screenshot(browser, "points-view", tmp_path)
        headers, rows = wait_for_columns(browser, swept)
    finally:
        browser.set_window_size(1600, 1000)
    assert "6 matching runs" in page, page[:3000]  # the points, each a row of its own: not the parent
    assert set(rows) == {p.info.run_name for p in points}, (rows.keys(), page[:3000])
    for key in ("output_throughput", "decode_speed", "speedup", "accept_length", "ttft_ms_p50", "tpot_ms_p50"):
        assert f"metrics.`{key}`" in headers, (key, headers)
    assert swept <= set(headers), headers  # the swept keys
    for p in points:
        row = rows[p.info.run_name]
        assert row["params.`batch`"] == p.data.params["batch"]  # exactly the value the point ran at
        assert row["params.`drafter.name`"] == p.data.params["drafter.name"]
        assert row["metrics.`output_throughput`"] == js_number(p.data.metrics["output_throughput"])
        assert row["metrics.`accept_length`"] == js_number(p.data.metrics["accept_length"])
        speedup = p.data.metrics.get("speedup")  # a drafter=none point is its own baseline
        assert row["metrics.`speedup`"] == (js_number(speedup) if speedup is not None else "-"), row
    assert {rows[p.info.run_name]["params.`batch`"] for p in points} == {"1", "2", "4"}  # swept.batch, exactly
