"""A dashboard nobody sees stops drawing, in real JupyterLab and Chromium: its output cleared,
the browser removes its views and says so (ipywidgets' ``_view_count``); its tab closed, the
Jupyter server says no browser is left. The kernel keeps counting samples but sends no chart;
seen again, it catches up at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.server.test_browser import lab_setup
from tests.support.kernel_client import kernel_says
from tests.support.lab import (
    chromium_page,
    jupyter_lab,
    open_notebook,
    run_cell,
    write_notebook,
)

from ..kernel import REPO

pytestmark = pytest.mark.browser

# waits (in the kernel) until ``until`` holds, then reports what four seconds of ticks did
# to the dashboard ``w``; in a cell, the kernel is idle while the browser's messages come
TICKS_ONCE = """import json, time
deadline = time.monotonic() + 60
while not ({until}) and time.monotonic() < deadline:
    time.sleep(0.1)
s0, c0 = w.samples, w.chart_updates
time.sleep(4)
print(json.dumps({{"views": w._view_count, "unseen": w.unseen,
                   "samples": w.samples - s0, "redraws": w.chart_updates - c0}}))"""
SHOWN, CLEARED = "w._view_count == 1", "w._view_count == 0"


def printed(page, index: int) -> dict:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    return json.loads(cell.locator(".jp-OutputArea-output").last.text_content() or "{}")


def test_a_cleared_dashboard_stops_drawing_and_catches_up_when_shown(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(
        root / "unseen.ipynb",
        [
            f"from trainwatch_lab import TrainWatch\nw = TrainWatch([{str(tmp_path)!r}], "
            "interval=0.5, window=60)\nw",
            TICKS_ONCE.format(until=SHOWN),
            TICKS_ONCE.format(until=CLEARED),
            "display(w)",
            TICKS_ONCE.format(until=SHOWN),
        ],
    )
    env = {"PYTHONPATH": str(REPO), "TRAINWATCH_LAB_STATE_DIR": str(tmp_path / "state")}
    with jupyter_lab(root, env=env) as lab, chromium_page((1440, 900)) as page:
        open_notebook(page, lab, "unseen.ipynb")
        dash = run_cell(page, 0)
        dash.locator(".tw-head[data-state='live']").wait_for(timeout=60_000)
        run_cell(page, 1)
        seen = printed(page, 1)
        assert seen["views"] == 1 and not seen["unseen"] and seen["redraws"] >= 2, seen
        # the output cleared, as a reader does (Edit > Clear Outputs of the cell)
        page.evaluate(
            """() => {
                const panel = window.jupyterapp.shell.currentWidget;
                panel.content.activeCellIndex = 0;
                return window.jupyterapp.commands.execute('notebook:clear-cell-output');
            }"""
        )
        page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".tw-head").wait_for(
            state="detached", timeout=30_000
        )
        run_cell(page, 2)
        gone = printed(page, 2)
        assert gone["views"] == 0 and gone["unseen"], gone
        assert gone["samples"] >= 4 and gone["redraws"] == 0, gone  # counted, not drawn
        shown = run_cell(page, 3)
        shown.locator(".tw-head[data-state='live']").wait_for(timeout=60_000)
        run_cell(page, 4)
        again = printed(page, 4)
        assert again["views"] == 1 and not again["unseen"] and again["redraws"] >= 2, again


def said(text: str) -> dict:
    """The JSON line the kernel printed last; a clear failure with its words otherwise."""
    try:
        return json.loads(text.splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"the kernel said: {text[-2000:]}")


def show_then_close(lab, notebook: str) -> str:
    """Open ``notebook`` in Chromium, run its first cell (a live dashboard), close the tab;
    returns what the cell showed."""
    with chromium_page((1440, 900)) as page:
        open_notebook(page, lab, notebook)
        dash = run_cell(page, 0)
        dash.locator(".tw-head[data-state='live']").wait_for(timeout=60_000)
        return dash.text_content() or ""


def test_a_closed_tab_stops_an_attached_dashboard_and_a_new_one_brings_it_back(
    tmp_path: Path,
) -> None:
    """A closed browser tab removes no view: the Jupyter server says no browser is left
    (``clients``) to its attached kernel, whose dashboard stops drawing; it drew on, and
    the server kept every message for a reconnect, in a list with no bound."""
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(
        root / "closed.ipynb",
        [
            "from trainwatch_lab import TrainWatch\n"
            f"w = TrainWatch([{str(tmp_path)!r}], window=60)\n"
            "print(type(w.sampler.find_source('paths')).__name__)\nw",  # attached: HubSource
        ],
    )
    args, env = lab_setup(tmp_path)
    env["TRAINWATCH_LAB_STATE_DIR"] = str(tmp_path / "state")
    with jupyter_lab(root, extra_args=args, env=env) as lab:
        shown = show_then_close(lab, "closed.ipynb")
        assert "HubSource" in shown
        # the browser is gone; the kernel runs on (asked over ZMQ: no browser)
        connection = lab.only_kernel_connection_file()
        gone = said(kernel_says(connection, TICKS_ONCE.format(until="w.unseen")))
        assert gone["unseen"] and gone["samples"] >= 2 and gone["redraws"] == 0, gone
        with chromium_page((1440, 900)) as page:
            open_notebook(page, lab, "closed.ipynb")
            back = said(kernel_says(connection, TICKS_ONCE.format(until="not w.unseen")))
            assert not back["unseen"] and back["redraws"] >= 2, back
