"""The dashboard in a real browser: JupyterLab started here, Debian's Chromium via Playwright.

Screenshots land in .test-artifacts/ (repo root, gitignored) for the CI run to keep.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import (
    LabServer,
    artifact_path,
    chromium_page,
    jupyter_lab,
    open_notebook,
    run_cell,
    set_theme,
    wait_cell_done,
    write_notebook,
)

from .kernel import REPO

pytestmark = pytest.mark.browser

# points drawn by the io chart: the most segments of any of its line paths, plus one
POINTS_JS = """(cell) => {
    const paths = [...cell.querySelectorAll('.tw-chart-io path.line')];
    const counts = paths.map(p => ((p.getAttribute('d') || '').match(/L/g) || []).length + 1);
    const drawn = paths.filter(p => (p.getAttribute('d') || '').length > 0);
    return drawn.length ? Math.max(...counts) : 0;
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    root = tmp_path_factory.mktemp("lab-root")
    env = {"PYTHONPATH": str(REPO)}  # kernels import the package even when not installed
    with jupyter_lab(root, env=env) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: LabServer) -> Iterator[Any]:
    with chromium_page() as p:
        yield p


def chart_points(page: Any, index: int) -> int:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index).element_handle()
    return page.evaluate(POINTS_JS, cell)


def cell_running(page: Any, index: int) -> bool:
    return page.evaluate(
        """(i) => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cell = panel.content.widgets[i];
            return cell.model.executionCount === null
                && panel.sessionContext.session.kernel.status === 'busy';
        }""",
        index,
    )


def test_chart_grows_while_a_cell_writes(lab: LabServer, page: Any) -> None:
    work = lab.root_dir / "work"
    work.mkdir()
    write_notebook(
        lab.root_dir / "live.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {work} --interval 0.5 --window 1m",
            "import os, time\n"
            "end = time.time() + 15\n"
            f"with open({str(work / 'blob.bin')!r}, 'wb') as fh:\n"
            "    while time.time() < end:\n"
            "        fh.write(os.urandom(1 << 20)); fh.flush(); os.fsync(fh.fileno())\n"
            "        time.sleep(0.1)\n"
            "'done'",
            "%%trainwatch\nimport time\ntime.sleep(4)",
        ],
    )
    open_notebook(page, lab, "live.ipynb")
    run_cell(page, 0)
    dash = run_cell(page, 1)
    dash.locator(".tw-chart-io").wait_for(timeout=60_000)
    page.wait_for_function(
        "(c) => (" + POINTS_JS + ")(c) >= 2",
        arg=dash.element_handle(),
        timeout=60_000,
    )
    page.screenshot(path=str(artifact_path("notebook-browser-1-started.png")), full_page=True)

    run_cell(page, 2, wait=False)
    page.wait_for_function(
        """() => {
            const p = window.jupyterapp.shell.currentWidget;
            return p.content.widgets[2].model.executionCount === null
                && p.sessionContext.session.kernel.status === 'busy';
        }""",
        timeout=30_000,
    )
    start = chart_points(page, 1)
    readings = []
    for _ in range(5):
        time.sleep(2.0)
        readings.append((chart_points(page, 1), cell_running(page, 2)))
    page.screenshot(path=str(artifact_path("notebook-browser-2-during-cell.png")), full_page=True)
    during = [n for n, running in readings if running]
    assert during, "the writing cell finished before we could look"
    assert max(during) > start, f"points did not grow during the cell: {start} -> {readings}"
    status = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-status")
    assert int(status.get_attribute("data-points") or 0) >= max(during) - 1
    # the throughput line really shows the writes: its label is the device under `work`
    legend = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-chart-io").inner_text()
    assert "write" in legend

    wait_cell_done(page, 2, timeout_ms=60_000)
    # theme-aware: the same line resolves to another colour in the dark theme
    line = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-chart-io path.line").first
    light = line.evaluate("(el) => getComputedStyle(el).stroke")
    set_theme(page, "JupyterLab Dark")
    page.wait_for_timeout(1000)
    dark = line.evaluate("(el) => getComputedStyle(el).stroke")
    page.screenshot(path=str(artifact_path("notebook-browser-3-dark.png")), full_page=True)
    set_theme(page, "JupyterLab Light")
    assert light and dark and light != dark, (light, dark)

    # the controls work from the browser (the kernel is idle, so their comm messages land)
    dash = page.locator(".jp-Notebook .jp-Cell").nth(1)
    dash.get_by_role("button", name="Pause").click()
    dash.locator(".tw-status[data-state='paused']").wait_for(timeout=30_000)
    paused_at = chart_points(page, 1)
    page.wait_for_timeout(2000)
    assert chart_points(page, 1) == paused_at
    dash.get_by_role("button", name="Resume").click()
    dash.locator(".tw-status[data-state='live']").wait_for(timeout=30_000)
    dash.get_by_role("button", name="Export CSV").click()
    saved = dash.locator(".tw-export")
    saved.wait_for(timeout=30_000)
    assert Path(saved.get_attribute("data-path") or "").read_text().startswith("t,")

    # %%trainwatch: a live strip while the cell runs, then the summary in its place
    strip_cell = run_cell(page, 3, wait=False)
    strip_cell.locator(".tw-strip").wait_for(timeout=30_000)
    page.wait_for_function(
        "(c) => (c.querySelector('.tw-strip') || {}).dataset?.samples > 0",
        arg=strip_cell.element_handle(),
        timeout=30_000,
    )
    strip_cell.screenshot(path=str(artifact_path("notebook-browser-5-strip.png")))
    wait_cell_done(page, 3, timeout_ms=60_000)
    strip_cell.locator(".tw-cell-summary").wait_for(timeout=30_000)
    assert strip_cell.locator(".tw-strip").count() == 0
    strip_cell.screenshot(path=str(artifact_path("notebook-browser-6-summary.png")))


def test_writer_on_sshfs_alerts_under_its_cell(lab: LabServer, page: Any, sshfs_mount: Any) -> None:
    logdir = Path(sshfs_mount.path) / "runs"
    write_notebook(
        lab.root_dir / "sshfs.ipynb",
        [
            "%load_ext trainwatch_lab",
            "class SummaryWriter:\n"
            "    def __init__(self, log_dir):\n"
            "        self.log_dir = log_dir\n"
            f"writer = SummaryWriter({str(logdir)!r})",
            "x = 1",
        ],
    )
    open_notebook(page, lab, "sshfs.ipynb")
    run_cell(page, 0)
    cell = run_cell(page, 1)
    alert = cell.locator(".tw-inline-alerts [data-code='shared-mount']")
    alert.wait_for(timeout=30_000)
    text = alert.inner_text()
    assert str(logdir) in text and "fuse.sshfs" in text and "Fix:" in text
    cell.screenshot(path=str(artifact_path("notebook-browser-4-sshfs-alert.png")))
    later = run_cell(page, 2)
    assert later.locator(".tw-inline-alerts").count() == 0


def test_warning_from_the_sampler_thread_shows_under_the_running_cell(
    lab: LabServer, page: Any
) -> None:
    """A condition that starts while cell 2 runs (threshold lowered so a real statvfs trips
    disk-almost-full) is rendered in cell 2's output area, not in cell 1's."""
    watched = lab.root_dir / "thread-alert"
    watched.mkdir()
    write_notebook(
        lab.root_dir / "thread.ipynb",
        [
            "import dataclasses, time\n"
            "from trainwatch_lab import TrainWatch\n"
            "from trainwatch_lab.core.defaults import DEFAULTS\n"
            "tw = TrainWatch([], interval=0.3, probe=False,\n"
            "                defaults=dataclasses.replace(DEFAULTS, full_fraction=1.0))\n"
            "tw",
            f"tw.add_path({str(watched)!r})\ntime.sleep(4)",
        ],
    )
    open_notebook(page, lab, "thread.ipynb")
    first = run_cell(page, 0)
    second = run_cell(page, 1, wait=False)
    second.locator(".tw-inline-alerts [data-code='disk-almost-full']").wait_for(timeout=30_000)
    assert cell_running(page, 1)  # it arrived while the cell was still running
    wait_cell_done(page, 1)
    assert first.locator(".tw-inline-alerts").count() == 0
    # the dashboard lists it too
    assert first.locator(".tw-alerts-pane [data-code='disk-almost-full']").count() == 1
    second.screenshot(path=str(artifact_path("notebook-browser-7-thread-alert.png")))
