"""A dashboard nobody sees stops drawing, in real JupyterLab and Chromium: its output cleared,
the browser removes its views and says so (ipywidgets' ``_view_count``); the kernel keeps
counting samples but sends no chart; shown again, it catches up at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.lab import (
    chromium_page,
    jupyter_lab,
    open_notebook,
    run_cell,
    write_notebook,
)

from ..kernel import REPO

pytestmark = pytest.mark.browser

# waits (in the kernel, idle between cells, so the browser's messages are handled) for the
# views to be ``want``, then reports what four seconds of ticks did
WATCH_TICKS = """import json, time
deadline = time.monotonic() + 60
while w._view_count != {want} and time.monotonic() < deadline:
    time.sleep(0.1)
s0, c0 = w.samples, w.chart_updates
time.sleep(4)
print(json.dumps({{"views": w._view_count, "unseen": w.unseen,
                   "samples": w.samples - s0, "redraws": w.chart_updates - c0}}))"""


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
            WATCH_TICKS.format(want=1),
            WATCH_TICKS.format(want=0),
            "display(w)",
            WATCH_TICKS.format(want=1),
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
