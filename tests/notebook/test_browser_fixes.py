"""The dashboard's lines for issues 13, 15 and 17 in a real JupyterLab and Chromium: a cell
that fsyncs a log puts "N % waiting on <path> (fsync)" in the verdict line and a band in the
"Time lost to storage" chart under Details; a ``local_mirror`` and a background checkpoint
save each get one quiet line under the bar, and the save's line says how long it took once it
landed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab import (
    LabServer,
    artifact_path,
    open_notebook,
    run_cell,
    set_theme,
    write_notebook,
)
from trainwatch_lab.core.paths.names import short_path

from .test_browser import (
    MAX_HEIGHT_ONE_PATH,
    check_contrast,
    dashboard,
    lab,
    page,
    show_file_browser,
    wait_state,
)

pytestmark = pytest.mark.browser
__all__ = ["lab", "page"]  # fixtures

FIX_LINES_PX = 2 * 22  # the mirror's line and the save's


def test_time_lost_mirror_and_save_beside_the_cell(lab: LabServer, page: Any) -> None:
    work = lab.root_dir / "fixes"
    logs, ckpt, scratch = work / "logs", work / "ckpt", work / "scratch"
    for d in (logs, ckpt, scratch):
        d.mkdir(parents=True)
    write_notebook(
        lab.root_dir / "fixes.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {logs} --interval 0.5",
            "import threading\nfrom trainwatch_lab import local_mirror, save_checkpoint\n"
            f"share, scratch = {str(work / 'share' / 'exp1')!r}, {str(scratch)!r}\n"
            "mirror = local_mirror(share, local_root=scratch)\n"
            "(mirror / 'events.out.tfevents.1').write_bytes(b'e' * 4096)\n"
            "assert mirror.sync(10)\n"
            "gate = threading.Event()\n"
            "def slow(p):\n    gate.wait(120)\n    open(p, 'wb').write(b'w' * 1024)\n"
            f"handle = save_checkpoint(slow, {str(ckpt / 'ckpt-0001.pt')!r}, background=True)",
            "import os, time\nt0 = time.time()\n"
            f"with open({str(logs / 'events.log')!r}, 'ab') as fh:\n"
            "    while time.time() - t0 < 8:\n"
            "        fh.write(b'x' * 4096); fh.flush(); os.fsync(fh.fileno())",
            "gate.set(); handle.wait(30); mirror.close(10)",
        ],
    )
    open_notebook(page, lab, "fixes.ipynb")
    show_file_browser(page)
    run_cell(page, 0)
    run_cell(page, 1)
    dash = dashboard(page, 1)
    wait_state(page, dash, {"state": "live"})
    run_cell(page, 2)
    run_cell(page, 3)

    # the verdict line: the time lost to the log directory, and to which call
    facts = dash.locator(".tw-facts")
    page.wait_for_function(
        "([root, want]) => (root.querySelector('.tw-facts')?.textContent ?? '').includes(want)",
        arg=[dash.element_handle(), f"waiting on {short_path(str(logs))} (fsync)"],
        timeout=30_000,
    )
    assert " % waiting on " in facts.inner_text()

    # the fixes at work: one line each, in the words of %trainwatch status
    mirror_line = dash.locator(".tw-fixes .tw-mirror")
    mirror_line.wait_for(timeout=30_000)
    assert mirror_line.inner_text().startswith("mirror to …/share/exp1: in sync (1 file")
    save_line = dash.locator(".tw-fixes .tw-save[data-in-flight='1']")
    save_line.wait_for(timeout=30_000)
    assert save_line.inner_text().startswith("saving ckpt-0001.pt in the background for ")
    height = dash.bounding_box()["height"]
    assert height <= MAX_HEIGHT_ONE_PATH + FIX_LINES_PX, f"{height:.0f} px"
    check_contrast(page, dash, "light")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-fixes.png")))

    # under Details: the chart of the time lost, one band per path
    dash.get_by_role("button", name="Details").click()
    waits = dash.locator(".tw-chart-waits")
    waits.locator("path.line").first.wait_for(timeout=30_000)
    keys = waits.locator(".tw-key").all_inner_texts()
    assert any(k.endswith("/logs") for k in keys), keys
    dash.screenshot(path=str(artifact_path("notebook-dashboard-fixes-details.png")))
    set_theme(page, "JupyterLab Dark")
    page.wait_for_timeout(500)
    check_contrast(page, dash, "dark")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-fixes-details-dark.png")))
    set_theme(page, "JupyterLab Light")
    dash.get_by_role("button", name="Details").click()
    # the loop ended seconds ago: the window still holds its time lost, and says so
    assert f"waiting on {short_path(str(logs))} (fsync)" in facts.inner_text()

    # the save lands, the mirror closes: the save's time stays, the mirror's line goes
    run_cell(page, 4)
    done = dash.locator(".tw-fixes .tw-save[data-in-flight='0']")
    done.wait_for(timeout=30_000)
    assert done.inner_text().startswith("the last save (ckpt-0001.pt, ")
    assert " took " in done.inner_text()
    dash.locator(".tw-fixes .tw-mirror").wait_for(state="detached", timeout=30_000)
