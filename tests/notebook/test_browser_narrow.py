"""The dashboard at 820 px (issue 36 item 4): the worst warning's one line keeps what matters.

A cell fills a small tmpfs through a log directory named like a mirror's scratch directory
(``trainwatch-mirror-0/runs-exp1-<digest>/tb``, 60 characters under the mount). At 820 px
the line read "/ (where /tmp/trainwatch-mirror/… lives) is fil…": the rate and the time to
full were cut. The line must show them whole, before any ellipsis. Screenshots of the
dashboard and the cell summary, light and dark, land in .test-artifacts/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import (
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

# where the numbers of the worst line end, and where its box (two lines at most) ends
FIT_JS = """(n) => {
    const text = n.textContent;
    const m = /full in about [^(]*/.exec(text);
    if (!m) return null;
    const range = document.createRange();
    range.setStart(n.firstChild, 0);
    range.setEnd(n.firstChild, m.index + m[0].trimEnd().length);
    const rects = [...range.getClientRects()];
    const end = rects[rects.length - 1], box = n.getBoundingClientRect();
    return {end: end.bottom, right: end.right, bottom: box.bottom, edge: box.right, text};
}"""


def test_at_820_px_the_worst_line_keeps_the_rate_and_time_to_full(
    tmp_path: Path, tmpfs_mount: Any
) -> None:
    fs = tmpfs_mount("40m").path
    logdir = fs / "trainwatch-mirror-0" / "runs-exp1-0123456789" / "tb"
    logdir.mkdir(parents=True)
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(
        root / "narrow.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {logdir} --window 1m",
            "%%trainwatch\nimport os, time\n"
            "for i in range(12):\n"
            f"    with open({str(logdir)!r} + f'/ckpt-{{i:02d}}.pt', 'wb') as fh:\n"
            "        fh.write(os.urandom(3 << 20)); fh.flush(); os.fsync(fh.fileno())\n"
            "    time.sleep(1)",
        ],
    )
    env = {"PYTHONPATH": str(REPO), "TRAINWATCH_LAB_STATE_DIR": str(tmp_path / "state")}
    with jupyter_lab(root, env=env) as lab, chromium_page((820, 900)) as page:
        open_notebook(page, lab, "narrow.ipynb")
        run_cell(page, 0)
        dash = run_cell(page, 1)
        dash.locator(".tw-head[data-state='live']").wait_for(timeout=60_000)
        run_cell(page, 2, wait=False)
        worst = dash.locator(".tw-worst")
        fit = None
        for _ in range(240):  # the fill takes 12 s; disk-filling shows within it
            if worst.count() and "is filling at" in (worst.text_content() or ""):
                fit = worst.evaluate(FIT_JS)
                if fit is not None:
                    break
            page.wait_for_timeout(100)
        assert fit is not None, "no disk-filling line during the fill"
        page.screenshot(path=str(artifact_path("notebook-dashboard-820-at-fill.png")))
        # the numbers end inside the line's box, not in what its clamp hides
        assert fit["end"] <= fit["bottom"] + 0.5 and fit["right"] <= fit["edge"] + 0.5, fit
        assert "trainwatch-mirror-0" not in fit["text"], fit
        dash.evaluate("n => n.scrollIntoView({block: 'start'})")
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(400)
            page.screenshot(path=str(artifact_path(f"notebook-dashboard-820-{theme}.png")))
        set_theme(page, "JupyterLab Light")
        wait_cell_done(page, 2)
        summary = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".tw-cell-summary")
        summary.wait_for(timeout=30_000)
        summary.evaluate("n => n.scrollIntoView({block: 'start'})")
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(400)
            page.screenshot(path=str(artifact_path(f"cell-summary-820-{theme}.png")))
        set_theme(page, "JupyterLab Light")
