"""What our charts send bqplot draws without an SVG error, in real JupyterLab and Chromium.

bqplot places each line's (hidden) label at the line's last point and draws each line from
its finite points: a line whose newest value is missing (a rate on the first tick, a
filesystem not measured this tick) became ``translate(x,undefined)`` (d3 scales map NaN to
undefined), and a line with no finite point at all became the path ``d="null"`` (issue 23,
item 12). A chart is fed here the shapes the dashboard feeds it, and the console must stay
clean of any SVG attribute error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import (
    chart_errors,
    chromium_page,
    console_recorder,
    jupyter_lab,
    open_notebook,
    run_cell,
    write_notebook,
)

from ..kernel import REPO

pytestmark = pytest.mark.browser

SETUP = """
import time
import numpy as np
from IPython.display import display
from trainwatch_lab.notebook.dashboard.bqcharts import Series, TimeChart
line, stacked = TimeChart("Disk", "MB/s", name="probe"), TimeChart(
    "Waits", "%", y_max=100.0, name="probe-fill", fill=True)
stacked.set_series([Series("a", (), stacked=True), Series("b", (), stacked=True)])
display(line.figure, stacked.figure)
"""

# each step: what the dashboard sends in that situation, one push to each chart
FEED = """
nan = np.nan
t0 = 1_700_000_000.0
def f32(rows):
    return np.asarray(rows, dtype=np.float32)
steps = [
    # the first tick: rates need two samples, so the only value is missing
    (np.array([t0]), f32([[nan]]), ["sda read"]),
    # two ticks, the newest still missing on one line of two
    (t0 + np.arange(2.0), f32([[1.0, 2.0], [3.0, nan]]), ["sda read", "sda write"]),
    # a line with no value yet beside one that has them
    (t0 + np.arange(4.0), f32([[1.0, 2.0, 3.0, 4.0], [nan] * 4]), ["sda read", "sdb read"]),
    # a gap (a paused sampler) and a newest value missing again
    (t0 + np.array([0.0, 1.0, 1.5, 5.0, 6.0]), f32([[1, 2, nan, 3, nan], [1, 1, nan, 2, 2]]),
     ["sda read", "sdb read"]),
    # nothing measured in the whole window
    (t0 + np.arange(3.0), f32([[nan] * 3, [nan] * 3]), ["sda read", "sdb read"]),
    # and data again
    (t0 + np.arange(5.0), f32([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]), ["sda read", "sdb read"]),
]
for t, y, labels in steps:
    line.push(t, y, labels)
    stacked.push(t, y, labels)
    time.sleep(0.4)
print("fed", line.points, stacked.points)
"""


def test_charts_fed_missing_values_draw_without_svg_errors(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "charts.ipynb", [SETUP, FEED])
    env = {"PYTHONPATH": str(REPO), "TRAINWATCH_LAB_STATE_DIR": str(tmp_path / "state")}
    with jupyter_lab(root, env=env) as lab, chromium_page((1440, 900)) as page:
        console = console_recorder(page)
        open_notebook(page, lab, "charts.ipynb")
        run_cell(page, 0)
        page.locator(".tw-chart-probe .tw-plot svg").first.wait_for(timeout=60_000)
        fed = run_cell(page, 1)
        fed.get_by_text("fed 5 5").wait_for(timeout=30_000)
        # the last step's lines are on screen: the browser has applied every step before it
        page.wait_for_function(
            "() => [...document.querySelectorAll('.tw-chart-probe path.line')]"
            ".filter(p => (p.getAttribute('d') || '').startsWith('M')).length === 2",
            timeout=30_000,
        )
    errors = chart_errors(console, "charts-console-errors.txt")
    assert not errors, errors
