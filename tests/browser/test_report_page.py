"""A sweep's report.html as a person sees it on a laptop: headless Chromium at 1280×800, the page
opened from disk with the network off. The sweep folder is the recorder's own, from hand-made points
(tests/report/test_html_report.py): no server is started for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specexp.report.html_report import REPORT
from tests.browser.test_mlflow_ui import CHROMEDRIVER, CHROMIUM, screenshot
from tests.conftest import needs
from tests.report.test_html_report import finished_sweep

pytestmark = [
    pytest.mark.browser,
    needs(CHROMIUM, "Debian's chromium", "apt-get install chromium chromium-driver"),
    needs(CHROMEDRIVER, "Debian's chromedriver", "apt-get install chromium-driver"),
]
WIDTH, HEIGHT = 1280, 800


@pytest.fixture
def laptop(tmp_path: Path) -> Iterator:
    """Chromium with a 1280×800 viewport and no network: a page that needs a CDN shows no figure."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.add_argument("--proxy-server=http://127.0.0.1:9")  # nothing listens there: offline
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        driver.set_window_size(WIDTH, HEIGHT)
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
        driver.set_window_size(2 * WIDTH - inner[0], 2 * HEIGHT - inner[1])  # the viewport, not the window
        yield driver
    finally:
        driver.quit()


def on_screen(driver, element) -> bool:
    """Whether the element is drawn, has a size, and lies wholly inside the viewport's width."""
    box = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.width, r.height]", element
    )
    return element.is_displayed() and box[2] > 0 and box[3] > 0 and box[0] >= 0 and box[1] <= WIDTH


def test_the_report_shows_its_verdict_table_and_figures_on_a_laptop_screen(tmp_path: Path, laptop) -> None:
    sweep_dir = tmp_path / "sweep"
    finished_sweep(sweep_dir)
    laptop.get((sweep_dir / REPORT).as_uri())
    assert laptop.execute_script("return [window.innerWidth, window.innerHeight]") == [WIDTH, HEIGHT]

    verdict = laptop.find_element("css selector", "#verdict li")
    assert verdict.text.startswith("tiny pays up to batch 4") and on_screen(laptop, verdict)
    top = laptop.execute_script("return arguments[0].getBoundingClientRect().bottom", verdict)
    assert top <= HEIGHT  # the answer in the first screen, before any scrolling
    table = laptop.find_element("css selector", "#points-table")
    assert on_screen(laptop, table) and "1,520, 1,680" in table.text
    headers = [h.text for h in table.find_elements("css selector", "th")]
    assert headers[:3] == ["folder", "config", "batch"] and "MLflow" in headers

    figure = laptop.find_element("css selector", "#figures .js-plotly-plot")  # drawn by the inlined plotly.js
    laptop.execute_script("arguments[0].scrollIntoView()", figure)
    assert on_screen(laptop, figure) and figure.find_elements("css selector", "svg.main-svg")
    assert "Output throughput" in figure.text
    screenshot(laptop, "report-figure", tmp_path)
    laptop.execute_script("window.scrollTo(0, 0)")
    screenshot(laptop, "report", tmp_path)
    scroll_width = laptop.execute_script("return document.documentElement.scrollWidth")
    assert scroll_width <= WIDTH  # no sideways scrolling
