"""The Training processes section in a real JupyterLab and Chromium: a script started
detached (``setsid -f python train.py``, nobody's child here) writing TensorBoard event
files is listed with its command, numbers, the time it loses to storage and directories; Hide
takes its row away."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.server.test_browser import PANEL, lab_setup, open_section, widen_sidebar
from tests.server.test_processes import detached_run
from tests.support import lab as lab_support
from tests.support.lab import artifact_path, chromium_page, jupyter_lab

pytestmark = [pytest.mark.browser]

ROWS = f"{PANEL} .jp-TrainWatch-process"
# A run with its event file open that then waits on its logdir for good: a read of a FIFO
# there that nobody writes (it holds the writing end itself), so its time lost to storage
# is all of it, whatever the disk (an fsync on a fast disk may cost under 0.5 %)
STUCK = r"""
import os, sys
logdir, pidfile = sys.argv[1], sys.argv[2]
events = open(os.path.join(logdir, "events.out.tfevents.1700000000.host"), "ab")
events.write(b"x" * 64)
events.flush()
fifo = os.path.join(logdir, "queue.fifo")
os.mkfifo(fifo)
fd = os.open(fifo, os.O_RDWR)
with open(pidfile + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(pidfile + ".tmp", pidfile)
os.read(fd, 1)
"""
OFF = "--TrainWatch.watch_processes=False"


@pytest.fixture
def discovering_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    """``jupyter_lab`` starts its lab with discovery off, and traitlets refuses a second
    ``--TrainWatch.watch_processes`` on the command line: this test's lab gets neither."""
    popen = subprocess.Popen

    def without_off(cmd, *args, **kwargs):
        if isinstance(cmd, list):
            cmd = [c for c in cmd if c != OFF]
        return popen(cmd, *args, **kwargs)

    monkeypatch.setattr(lab_support.subprocess, "Popen", without_off)


@pytest.mark.usefixtures("discovering_lab")
def test_a_detached_run_is_listed_and_can_be_hidden(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    logdir.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    with (
        detached_run(logdir, tmp_path, STUCK) as pid,
        jupyter_lab(root, extra_args=args, env=env) as lab,
        chromium_page((1400, 1000)) as page,
    ):
        page.goto(lab.url("lab"))
        page.wait_for_function("() => !!window.trainwatchLab", timeout=90_000)
        page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
        page.locator(PANEL).wait_for(state="visible", timeout=30_000)
        widen_sidebar(page, 420)
        # the section shows once a process is found, folded (the panel fits 900 px): open it
        section = page.locator(f"{PANEL} .jp-TrainWatch-section[data-section='processes']")
        section.wait_for(timeout=60_000)
        open_section(page, "processes")
        row = page.locator(f"{ROWS}[data-pid='{pid}']")
        row.wait_for(timeout=60_000)
        assert page.locator(f"{PANEL} .jp-TrainWatch-processes").is_visible()
        command = row.locator(".jp-TrainWatch-processCommand").inner_text()
        assert command.startswith(f"pid {pid} python") and "train.py" in command
        assert row.locator(".jp-TrainWatch-processFacts").inner_text()
        page.wait_for_function(
            f"""() => [...document.querySelectorAll("{ROWS}[data-pid='{pid}'] """
            """.jp-TrainWatch-processPaths li")].some(li => li.title.startsWith('"""
            f"""{logdir}'))""",
            timeout=30_000,
        )
        # its time lost to storage (issue 15): all of it, on its logdir; measured on the
        # server (core.processes.waits), worded in the row
        lost = row.locator(".jp-TrainWatch-processWait")
        lost.first.wait_for(timeout=30_000)
        page.wait_for_function(
            f"""() => /^waiting on …\\/.*\\/runs (9\\d|100) %$/.test(document.querySelector(
                "{ROWS}[data-pid='{pid}'] .jp-TrainWatch-processWait")?.textContent ?? '')""",
            timeout=30_000,
        )
        row.scroll_into_view_if_needed()
        page.locator(f"{PANEL} .jp-TrainWatch-processes").screenshot(
            path=str(artifact_path("lab-panel-processes.png"))
        )
        row.locator(".jp-TrainWatch-processHide").click()
        row.wait_for(state="detached", timeout=30_000)
        page.wait_for_timeout(2_000)  # a few samples later it stays away
        assert page.locator(f"{ROWS}[data-pid='{pid}']").count() == 0
        hidden = lab.api("trainwatch-lab/api/processes")["hidden"]
        assert hidden == [pid]
