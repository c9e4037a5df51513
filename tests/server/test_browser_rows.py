"""A row of the panel stays the element it was while what it shows is listed. The sections
were rebuilt on every sample: a reader's focus on a row's button went back to the page, a
selected path vanished within a second, and a screenshot of a row failed in CI with
"Element is not attached to the DOM"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_browser import PANEL, lab_setup, open_section, panel_counters
from tests.server.test_browser_replay import open_panel
from tests.support.lab import chromium_page, jupyter_lab

pytestmark = pytest.mark.browser

ROW = f"{PANEL} .jp-TrainWatch-pathRow"

# mark the row (an expando property: a new element would not have it), focus its button and
# select its path, as a reader about to copy it would
HOLD_JS = """(row) => {
    row.twHeld = true;
    row.querySelector('.jp-TrainWatch-remove').focus();
    window.getSelection().selectAllChildren(row.querySelector('.jp-TrainWatch-pathName'));
}"""

HELD_JS = """(path) => {
    const rows = [...document.querySelectorAll('#trainwatch-lab-panel .jp-TrainWatch-pathRow')];
    const row = rows.find(r => r.dataset.path === path);
    return {
        order: rows.map(r => r.dataset.path),
        same: !!row && row.twHeld === true,
        focused: !!row && document.activeElement === row.querySelector('.jp-TrainWatch-remove'),
        selected: window.getSelection().toString(),
    };
}"""


def wait_for_samples(page, more: int) -> None:
    """Wait until the panel has taken ``more`` samples past the ones it has now."""
    target = panel_counters(page)["samples"] + more
    page.wait_for_function(
        "(n) => Number(document.querySelector('#trainwatch-lab-panel').dataset.samples) >= n",
        arg=target,
        timeout=60_000,
    )


def test_a_path_row_keeps_the_readers_focus_and_selection_across_samples(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    later, earlier = tmp_path / "b-logs", tmp_path / "a-logs"
    later.mkdir()
    earlier.mkdir()
    args, env = lab_setup(tmp_path)
    env["TRAINWATCH_LAB_STATE_DIR"] = str(tmp_path / "state")
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1440, 900)) as page:
        lab.api("trainwatch-lab/api/paths", "POST", {"path": str(later)})
        open_panel(page, lab)
        open_section(page, "paths")
        row = page.locator(f"{ROW}[data-path='{later}']")
        row.wait_for(state="visible", timeout=60_000)
        # the launcher takes the focus when it opens, once JupyterLab is restored
        page.locator(".jp-Launcher").wait_for(state="visible", timeout=60_000)
        row.evaluate(HOLD_JS)
        # a path that sorts before it, added behind the panel's back: its row goes in above
        lab.api("trainwatch-lab/api/paths", "POST", {"path": str(earlier)})
        page.locator(f"{ROW}[data-path='{earlier}']").wait_for(timeout=60_000)
        wait_for_samples(page, 3)
        held = page.evaluate(HELD_JS, str(later))
        assert held["order"].index(str(earlier)) < held["order"].index(str(later)), held
        assert held["same"], held
        assert held["focused"], held
        assert held["selected"].replace("\n", "") == str(later), held
        # the row still says what is new: the latency its probe measured since
        page.wait_for_function(
            "(row) => row.textContent.includes('write+fsync')",
            arg=row.element_handle(),
            timeout=60_000,
        )
        # and a path no longer watched takes its row away, the others stay
        lab.api(f"trainwatch-lab/api/paths?path={earlier}", "DELETE")
        page.locator(f"{ROW}[data-path='{earlier}']").wait_for(state="detached", timeout=60_000)
        assert page.evaluate(HELD_JS, str(later))["same"]
