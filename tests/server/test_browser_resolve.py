"""A hung share named in a cell's stderr never freezes Jupyter (issue 34), in a real JupyterLab
and a real Chromium: the front end turns each path of the output into a link and asks the
server about it (``/api/resolvePath``); the server keeps answering every other request while
the share does not answer, and the notebook can still run a cell."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.server.test_browser import lab_setup
from tests.support.lab import chromium_page, jupyter_lab, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.root]

# the share is resumed by a watchdog after this long, so that a server frozen on it fails the
# test rather than hanging it; far beyond the guard's 2 s timeout and a loaded machine's lag
WATCHDOG_S = 60.0


def test_a_share_path_in_stderr_never_freezes_jupyter(tmp_path: Path, sshfs_mount) -> None:
    runs = sshfs_mount.path / "runs"
    runs.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "runs").symlink_to(runs)  # the logdir next to the notebook, on the share
    # names sshfs has never looked up: no cached attribute answers for the paused share
    write_notebook(
        root / "a.ipynb",
        [
            "import sys\n"
            f"print('writer failed: {runs}/never-looked-up.tfevents', file=sys.stderr)\n"
            "print('see runs/also-never-looked-up.txt', file=sys.stderr)",
            "print(1 + 1)",
        ],
    )
    args, env = lab_setup(tmp_path)
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page() as page:
        open_notebook(page, lab, "a.ipynb")
        sshfs_mount.pause()
        resumed = threading.Event()

        def rescue() -> None:
            resumed.set()
            sshfs_mount.resume()

        watchdog = threading.Timer(WATCHDOG_S, rescue)
        watchdog.start()
        try:
            with page.expect_request(lambda r: "/api/resolvePath" in r.url, timeout=60_000):
                run_cell(page, 0)
            status = lab.api("api/status", timeout=WATCHDOG_S * 2)
            assert status is not None and not resumed.is_set(), "frozen until the share resumed"
            out = run_cell(page, 1)  # the kernel's messages still flow through the server
            assert "2" in out.inner_text()
            assert not resumed.is_set()
        finally:
            watchdog.cancel()
            sshfs_mount.resume()
