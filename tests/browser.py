"""The dashboard in a real browser, for `tests/test_search.py`'s search: `nas dashboard`
serving its MLflow store, in headless Chromium (Debian's `chromium`, driven by Playwright):
- the URL it prints, opened in a fresh profile, lands on MLflow's model-training view of the
  search's parent run with its child runs listed (not on MLflow's default GenAI view);
- the parent run's pareto.html: the right number of points, a hover that names a candidate.
Screenshots are kept as test artifacts.

`.ci/run` installs chromium and sets RECNAS_REQUIRE_BROWSER=1, so CI never skips this check;
on a machine without chromium it is skipped, saying why."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nas.service.registry import Registry
from tests.test_search import REPO, env_for, registry_of

ARTIFACTS = Path(os.environ.get("RECNAS_TEST_ARTIFACTS") or REPO / "nas-runs" / "test-artifacts")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("RECNAS_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it")
    return found


def check_dashboard(runs: Path, search_id: str) -> None:
    """`nas dashboard` of the finished search ``search_id`` in ``runs``, seen in Chromium."""
    from playwright.sync_api import sync_playwright

    from tests.test_reliability import _free_port

    browser_path = _chromium()
    registry: Registry = registry_of(runs)
    trials = [t for t in registry.trials(search_id) if t.status == "completed"]
    searched = [t for t in trials if t.kind == "searched"]
    baselines = [t for t in trials if t.is_baseline]
    port = _free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "nas.cli", "dashboard", search_id, "--port", str(port)],
        env=env_for(runs), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        try:
            line = process.stdout.readline()
            assert line.startswith(f"{search_id}: http://127.0.0.1:{port}/"), line
            assert line.rstrip().endswith("?workflowType=machine_learning"), line
            run_id = line.strip().split("?")[0].rsplit("/", 1)[1]
            url = f"http://127.0.0.1:{port}/get-artifact?path=pareto.html&run_uuid={run_id}"
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=browser_path, args=CHROMIUM_FLAGS
                )
                try:
                    logged = [t for t in registry.trials(search_id) if t.mlflow_run_id]
                    _check_landing(browser, line.split(": ", 1)[1].strip(), logged)
                    _check_page(browser, url, searched, baselines)
                finally:
                    browser.close()
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=90)
    registry.engine.dispose()


def _check_landing(browser, url: str, trials) -> None:
    """What a newcomer sees first: a fresh profile (no MLflow settings in its storage)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        page.get_by_text("Child runs", exact=True).wait_for(timeout=120_000)
        # MLflow fills the row in after the page: wait until no part of it is loading.
        page.get_by_text("Child runs loading").wait_for(state="detached", timeout=120_000)
        body = page.inner_text("body")
        assert "Evaluation runs" not in body, "landed on MLflow's GenAI view"
        children = body.split("Child runs", 1)[1].split("Source", 1)[0]
        names = [n.strip() for n in children.split(",") if n.strip()]
        assert len(names) == len(trials), children
        assert {t.label for t in trials if t.is_baseline} <= set(names), children
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard_landing.png"))
    finally:
        context.close()


def _check_page(browser, url: str, searched, baselines) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 1400})

    def inline(route):  # MLflow serves artifacts as downloads: show this one instead
        response = route.fetch()
        headers = {k: v for k, v in response.headers.items() if k != "content-disposition"}
        route.fulfill(response=response, headers=headers)

    page.route(url, inline)
    page.goto(url)
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace path.point", timeout=60_000)
    front = page.locator(".js-plotly-plot").first
    traces = front.locator(".scatterlayer .trace")
    # Traces in order: searched candidates, baselines, the front's staircase, the knee.
    assert traces.nth(0).locator("path.point").count() == len(searched)
    assert traces.nth(1).locator("path.point").count() == len(baselines)
    assert traces.nth(3).locator("path.point").count() == 1
    legend = front.locator(".legendtext").all_text_contents()
    assert legend[:2] == ["searched candidates", "baselines"]
    # Hovering a baseline's point shows its label.
    traces.nth(1).locator("path.point").first.hover(force=True)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    hover = " ".join(page.locator(".hoverlayer .hovertext").all_text_contents())
    assert any(t.label in hover for t in baselines), hover
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "pareto_html.png"), full_page=True)
    assert (ARTIFACTS / "pareto_html.png").stat().st_size > 10_000
