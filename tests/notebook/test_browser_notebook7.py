"""The dashboard in Notebook 7 (``notebook>=7``, the test extra), not only in JupyterLab: the
README says it works there, and nothing tested it (issue 23, item 12).

The same server serves Notebook 7's ``/notebooks/NAME`` page; Debian's Chromium opens it, the
cells run from the keyboard as a user would (Shift+Enter), and the dashboard goes live with
its verdict, its charts drawing points, and no SVG error in the console.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support.env import need
from tests.support.lab import (
    artifact_path,
    chart_errors,
    chromium_page,
    console_recorder,
    jupyter_lab,
    write_notebook,
)

from .kernel import REPO

pytestmark = pytest.mark.browser


def test_the_dashboard_in_notebook_7(tmp_path: Path) -> None:
    need(importlib.util.find_spec("notebook") is not None, "needs notebook>=7 (the test extra)")
    root = tmp_path / "root"
    root.mkdir()
    watched = tmp_path / "runs"
    watched.mkdir()
    write_notebook(
        root / "nb7.ipynb",
        ["%load_ext trainwatch_lab", f"%trainwatch {watched} --interval 0.5 --window 1m"],
    )
    env = {"PYTHONPATH": str(REPO), "TRAINWATCH_LAB_STATE_DIR": str(tmp_path / "state")}
    with jupyter_lab(root, env=env) as lab, chromium_page((1440, 900)) as page:
        from playwright.sync_api import (
            TimeoutError as PlaywrightTimeout,
        )  # (chromium_page needs it)

        console = console_recorder(page)
        page.goto(lab.url("notebooks/nb7.ipynb"))
        page.wait_for_selector("#main-panel .jp-Notebook .jp-Cell", timeout=120_000)
        assert "/lab" not in page.url  # Notebook 7's page, not JupyterLab's
        # the kernel's session is up and idle; then run both cells from the keyboard, again if
        # the page had not connected to the kernel yet (no dashboard came back)
        for _ in range(6):
            sessions = lab.api("api/sessions")
            if any(x["kernel"]["execution_state"] == "idle" for x in sessions):
                page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").nth(0).click()
                page.keyboard.press("Escape")  # command mode: Shift+Enter runs and moves on
                page.keyboard.press("Shift+Enter")
                page.keyboard.press("Shift+Enter")
                try:
                    page.locator(".tw-head").wait_for(timeout=30_000)
                    break
                except PlaywrightTimeout:
                    pass
            page.wait_for_timeout(2_000)
        head = page.locator(".tw-head[data-state='live']")
        try:
            head.wait_for(timeout=120_000)
        finally:
            page.screenshot(path=str(artifact_path("notebook7-dashboard.png")))
        page.wait_for_function(
            "() => Number(document.querySelector('.tw-head').dataset.points) >= 2",
            timeout=60_000,
        )
        assert page.locator(".tw-chart-io path.line").count() >= 1
        assert page.locator(".tw-head .tw-verdict").inner_text().strip()

    # charts drawn before they had a size (negative rects) and lines ending on a missing value
    # (translate(x,undefined), d="null") were ours, and are gone: any error of bqplot fails
    errors = chart_errors(console, "notebook7-console-errors.txt")
    assert not errors, errors
