"""The dashboard at 820 px (issue 36 item 4): the worst warning's one line keeps what matters.

A cell fills a small tmpfs through a log directory named like a mirror's scratch directory
(``trainwatch-mirror-0/runs-exp1-<digest>/tb``, 60 characters under the mount). At 820 px
the line read "/ (where /tmp/trainwatch-mirror/… lives) is fil…": the rate and the time to
full were cut. The line must show them whole, before any ellipsis; so must the mirror's line
(a real ``local_mirror`` whose scratch path is as long) its state. Screenshots of the
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

# Whether a line shows its text up to where ``pattern`` (a regular expression) ends, whole: a
# copy of the line holding only that text and the ellipsis its clamp draws over whatever
# follows (it replaces the last glyphs that fit) must not overflow the line's box (two lines
# at most), laid out by the browser itself beside the line.
FITS_JS = """(n, pattern) => {
    const text = n.textContent;
    const m = new RegExp(pattern).exec(text);
    if (!m) return null;
    const copy = n.cloneNode(false);
    copy.textContent = text.slice(0, m.index + m[0].trimEnd().length) + '\u2026';
    copy.style.width = `${n.getBoundingClientRect().width}px`;
    n.parentNode.insertBefore(copy, n.nextSibling);
    const over = {x: copy.scrollWidth - copy.clientWidth, y: copy.scrollHeight - copy.clientHeight};
    copy.remove();
    return {over, text};
}"""
WORST_NUMBERS = "full in about [^(]*"  # the rate and the time to full come before it
MIRROR_STATE = "^[^;]*"  # "mirror to …/runs/exp1: in sync (1 file, last sync 3 s ago)"


def shown_whole(line: Any, pattern: str) -> dict[str, Any] | None:
    return line.evaluate(FITS_JS, pattern)


def assert_fits(fit: dict[str, Any] | None) -> None:
    assert fit is not None and fit["over"]["x"] <= 0 and fit["over"]["y"] <= 0, fit


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
            "from trainwatch_lab import local_mirror\n"
            f"mirror = local_mirror({str(fs / 'share' / 'runs' / 'exp1')!r}, "
            f"local_root={str(fs / 'trainwatch-scratch-0123456789abcdef')!r})\n"
            "(mirror / 'events.out.tfevents.1').write_bytes(b'e' * 4096)\n"
            "assert mirror.sync(10)",
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
        run_cell(page, 2)
        mirror_line = dash.locator(".tw-fixes .tw-mirror")
        page.wait_for_function(
            "root => (root.querySelector('.tw-fixes .tw-mirror')?.textContent ?? '')"
            ".includes('in sync (1 file')",
            arg=dash.element_handle(),
            timeout=30_000,
        )
        mirror_fit = shown_whole(mirror_line, MIRROR_STATE)
        assert mirror_fit and mirror_fit["text"].startswith("mirror to …/runs/exp1: in sync (1 ")
        assert_fits(mirror_fit)
        run_cell(page, 3, wait=False)
        worst = dash.locator(".tw-worst")
        fit = None
        for _ in range(240):  # the fill takes 12 s; disk-filling shows within it
            if worst.count() and "is filling at" in (worst.text_content() or ""):
                fit = shown_whole(worst, WORST_NUMBERS)
                if fit is not None:
                    break
            page.wait_for_timeout(100)
        assert fit is not None, "no disk-filling line during the fill"
        page.screenshot(path=str(artifact_path("notebook-dashboard-820-at-fill.png")))
        assert_fits(fit)  # the numbers, not what the clamp hides
        assert "trainwatch-mirror-0" not in fit["text"], fit
        assert_fits(shown_whole(mirror_line, MIRROR_STATE))  # the notebook has grown since
        dash.evaluate("n => n.scrollIntoView({block: 'start'})")
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(400)
            page.screenshot(path=str(artifact_path(f"notebook-dashboard-820-{theme}.png")))
        set_theme(page, "JupyterLab Light")
        wait_cell_done(page, 3)
        summary = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".tw-cell-summary")
        summary.wait_for(timeout=30_000)
        summary.evaluate("n => n.scrollIntoView({block: 'start'})")
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(400)
            page.screenshot(path=str(artifact_path(f"cell-summary-820-{theme}.png")))
        set_theme(page, "JupyterLab Light")
