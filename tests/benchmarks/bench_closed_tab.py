"""What a dashboard costs once its browser tab is closed: the Jupyter server's memory and the
kernel's redraws over some minutes.

``python -m tests.benchmarks.bench_closed_tab [--minutes 5] [--tree DIR]`` prints one
markdown table; ``--tree`` runs another checkout's trainwatch_lab (e.g. a ``git worktree``
of an older commit, for "before"). Reports, asserts nothing.

A real JupyterLab with the server extension and Debian's Chromium: a notebook shows
``TrainWatch([tmp], window=60)`` (attached to the server's sampler), the tab is closed, and
the server's RSS is read every 10 s. jupyter_server keeps what a kernel sends while no
browser is connected, for a reconnect, in a list with no bound (``start_buffering``): a
dashboard that draws on grows it by every message. At the end the kernel is asked over ZMQ
(no browser) how many samples it took and how many chart redraws it sent meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import psutil

from tests.notebook.dashboard.test_browser_unseen import show_then_close
from tests.server.test_browser import lab_setup
from tests.support.kernel_client import kernel_says
from tests.support.lab import jupyter_lab, write_notebook

COUNTS = "print(__import__('json').dumps({'samples': w.samples, 'redraws': w.chart_updates}))"


def server_rss(pid: int) -> int:
    """The server process's resident memory: the buffer lives in it."""
    return psutil.Process(pid).memory_info().rss


def measure(minutes: float, tree: Path | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="twbench-closed-") as tmp:
        base = Path(tmp)
        root = base / "root"
        root.mkdir()
        write_notebook(
            root / "closed.ipynb",
            [f"from trainwatch_lab import TrainWatch\nw = TrainWatch([{tmp!r}], window=60)\nw"],
        )
        args, env = lab_setup(base)
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        env["TRAINWATCH_LAB_STATE_DIR"] = str(base / "state")
        with jupyter_lab(root, extra_args=args, env=env) as lab:
            show_then_close(lab, "closed.ipynb")
            connection = lab.only_kernel_connection_file()
            time.sleep(10)  # the close is seen, the last messages out
            start = json.loads(kernel_says(connection, COUNTS).splitlines()[-1])
            rss0 = server_rss(lab.proc.pid)
            t0 = time.monotonic()
            while time.monotonic() - t0 < minutes * 60:
                time.sleep(10)
            rss1 = server_rss(lab.proc.pid)
            end = json.loads(kernel_says(connection, COUNTS).splitlines()[-1])
    return {
        "minutes": minutes,
        "samples": end["samples"] - start["samples"],
        "redraws": end["redraws"] - start["redraws"],
        "server_rss_growth_mib": (rss1 - rss0) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_closed_tab")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--tree", type=Path, default=None, help="another checkout to run")
    args = parser.parse_args()
    result = measure(args.minutes, args.tree)
    label = str(args.tree or os.getcwd())
    print("| tree | minutes closed | samples taken | chart redraws sent | server RSS growth |")
    print("|---|---|---|---|---|")
    print(
        f"| {label} | {result['minutes']:g} | {result['samples']} | {result['redraws']} "
        f"| {result['server_rss_growth_mib']:+.1f} MiB |"
    )


if __name__ == "__main__":
    main()
