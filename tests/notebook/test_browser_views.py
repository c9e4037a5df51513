"""Every view tells the same story during a fill (issue 23, item 3), in real JupyterLab and
Debian's Chromium at 1440x900.

A small tmpfs is watched by the notebook (``%trainwatch PATH``) and by the server (``POST
api/paths``); a ``%%trainwatch`` cell writes checkpoints into it until it is almost full. While
it runs, the dashboard's, the panel's and the status bar's warning counts are read in one
JavaScript call (one moment in the browser), with the dashboard's sample count and the panel's
message count: a disagreement may last while either side has not yet shown the next tick, never
longer (counted in ticks, not seconds). Once the disk holds still every view agrees, and
``%trainwatch status`` lists the warnings the dashboard shows. The screenshots of the README
(the dashboard, light and dark) and of the cell summary are taken here, during the fill.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_browser import PANEL, lab_setup
from tests.support.lab import (
    artifact_path,
    chart_errors,
    chromium_page,
    console_recorder,
    jupyter_lab,
    open_notebook,
    run_cell,
    set_theme,
    wait_cell_done,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.root]

VIEWPORT = (1440, 900)
MAX_ROW_PX = 30  # a warning under Details: one line (a 20 px toggle and its sentence)
ROW_HEIGHTS_JS = (
    "() => [...document.querySelectorAll('.tw-alerts-pane .tw-warn-row')]"
    ".map(r => r.getBoundingClientRect().height)"
)
LAG_TICKS = 3  # one tick of lag, plus the two samplers' phases and the websocket
# the clock labels under our charts' x axes (their ticks are translate(x,0))
X_LABELS_JS = """() => [...document.querySelectorAll('.trainwatch .tw-plot .tick')]
    .filter(t => /translate\\([^,]+,\\s*0\\)/.test(t.getAttribute('transform') || ''))
    .map(t => t.textContent.trim()).filter(x => x)"""

# counts of non-info warnings in each view, read at one moment; ``fs`` is the tmpfs
VIEWS_JS = (
    """(fs) => {
    const mine = (nodes) => nodes.filter(n => (n.dataset.subject || '').startsWith(fs)).length;
    const head = document.querySelector('.tw-head');
    const lines = [...document.querySelectorAll('.tw-alerts-pane .tw-warn-line')];
    const rows = [...document.querySelectorAll('PANEL .jp-TrainWatch-warning')]
        .filter(w => !w.classList.contains('jp-mod-info'));
    const bar = document.querySelector('.jp-TrainWatch-status');
    const m = bar ? bar.textContent.match(/⚠\\s*(\\d+)/) : null;
    const lab = window.trainwatchLab;
    return {
        dashboard: head ? Number(head.dataset.warnings) : -1,
        dashboardRows: mine(lines),
        dashboardTicks: head ? Number(head.dataset.samples) : 0,
        panel: mine(rows),
        panelAll: rows.length,
        panelTicks: lab ? lab.stream.stats.messages : 0,
        statusBar: bar ? (m ? Number(m[1]) : 0) : -1,
    };
}"""
).replace("PANEL", PANEL)


def views(page: Any, fs: str) -> dict[str, int]:
    return page.evaluate(VIEWS_JS, fs)


def agree(v: dict[str, int]) -> bool:
    """The same paths get the same count; the status bar counts the panel's (the machine)."""
    return v["dashboard"] == v["dashboardRows"] == v["panel"] and v["statusBar"] == v["panelAll"]


def test_dashboard_panel_and_status_bar_count_the_same_warnings_during_a_fill(
    tmp_path: Path, tmpfs_mount: Any
) -> None:
    fs = tmpfs_mount("40m").path
    ckpt, logs = fs / "ckpt", fs / "logs"
    ckpt.mkdir()
    logs.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(
        root / "fill.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {ckpt} {logs} --window 1m",
            # the scripted fill: 13 checkpoints of 3 MiB, one a second, and a log line each,
            # until about 1 MiB of the 40 is left (almost full; the next one would not fit)
            "%%trainwatch\nimport os, time\n"
            "for i in range(13):\n"
            f"    with open({str(ckpt)!r} + f'/ckpt-{{i:02d}}.pt', 'wb') as fh:\n"
            "        fh.write(os.urandom(3 << 20)); fh.flush(); os.fsync(fh.fileno())\n"
            f"    with open({str(logs)!r} + '/train.log', 'a') as fh:\n"
            "        fh.write(f'step {i}\\n')\n"
            "    time.sleep(1)",
            "%trainwatch status",
        ],
    )
    args, env = lab_setup(tmp_path)
    env["TRAINWATCH_LAB_STATE_DIR"] = str(tmp_path / "state")
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page(VIEWPORT) as page:
        console = console_recorder(page)
        for p in (ckpt, logs):
            lab.api("trainwatch-lab/api/paths", "POST", {"path": str(p)})
        open_notebook(page, lab, "fill.ipynb")
        page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
        page.locator(PANEL).wait_for(state="visible", timeout=60_000)
        run_cell(page, 0)
        dash = run_cell(page, 1)
        dash.locator(".tw-head[data-state='live']").wait_for(timeout=60_000)
        dash.get_by_role("button", name="Details").click()  # the warnings, one line each
        dash.locator(".tw-alerts-pane").wait_for(timeout=30_000)
        page.wait_for_function(
            "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 2",
            timeout=60_000,
        )

        run_cell(page, 2, wait=False)
        seen: list[dict[str, int]] = []
        since: dict[str, int] | None = None  # the first reading of a disagreement
        shot = False
        while True:
            done = page.evaluate(
                "() => window.jupyterapp.shell.currentWidget.content.widgets[2]"
                ".model.executionCount !== null"
            )
            v = views(page, str(fs))
            seen.append(v)
            if agree(v):
                since = None
            elif since is None:
                since = v
            else:
                late = min(
                    v["dashboardTicks"] - since["dashboardTicks"],
                    v["panelTicks"] - since["panelTicks"],
                )
                assert late <= LAG_TICKS, (since, v, seen[-20:])
            if not shot and v["dashboard"] >= 2 and agree(v):
                # Details stay compact: one line per warning, however long its sentence
                rows = page.evaluate(ROW_HEIGHTS_JS)
                assert rows and max(rows) <= MAX_ROW_PX, rows
                dash.evaluate("n => n.scrollIntoView({block: 'start'})")
                page.screenshot(path=str(artifact_path("notebook-dashboard.png")))
                set_theme(page, "JupyterLab Dark")
                page.screenshot(path=str(artifact_path("notebook-dashboard-dark.png")))
                set_theme(page, "JupyterLab Light")
                shot = True
            if done:
                break
            page.wait_for_timeout(250)
        wait_cell_done(page, 2)
        assert max(v["dashboard"] for v in seen) >= 1, seen[-5:]  # the fill was seen
        cell = page.locator(".jp-Notebook .jp-Cell").nth(2)
        summary = cell.locator(".tw-cell-summary")
        summary.wait_for(timeout=30_000)
        # the warnings shown as they were raised gave their place to the summary's lines
        cell.locator(".tw-inline-alerts").first.wait_for(state="detached", timeout=30_000)
        assert summary.locator("details[data-code='disk-filling']").count() == 1
        summary.evaluate("n => n.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(artifact_path("cell-summary.png")))

        # every clock label is a time, never raw seconds since the chart's origin ("7")
        page.wait_for_timeout(1_500)  # (a redraw in flight ends)
        labels = page.evaluate(X_LABELS_JS)
        assert labels and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", x) for x in labels), labels

        # the disk holds still now: every view settles on the same count
        page.wait_for_function(
            f"(fs) => {{ const v = ({VIEWS_JS})(fs); return "
            "v.dashboard === v.dashboardRows && v.dashboard === v.panel "
            "&& v.statusBar === v.panelAll; }",
            arg=str(fs),
            timeout=60_000,
        )
        settled = views(page, str(fs))
        assert settled["dashboard"] >= 1, settled  # 1 MiB of 40 left: almost full

        # %trainwatch status lists the warnings the dashboard shows, sentence for sentence
        status = run_cell(page, 3)
        text = status.locator(".jp-OutputArea-output").inner_text()
        shown = page.evaluate(
            "() => [...document.querySelectorAll('.tw-alerts-pane .tw-warn-line')]"
            ".map(n => n.getAttribute('title'))"
        )
        assert shown and all(sentence in text for sentence in shown), (shown, text)
        assert "this notebook's 2 paths" in text
        # negative rect sizes (charts drawn before they had a size) and translate(x,undefined)
        # / d="null" (lines ending on a missing value) came from what we sent: any error of
        # bqplot fails
        errors = chart_errors(console, "notebook-console-errors.txt")
        assert not errors, errors
