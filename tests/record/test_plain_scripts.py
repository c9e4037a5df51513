"""A plain script that only writes into a watched path is a run, and its end is told after
the recorder restarts (issue 35 item 1): no TensorBoard, no GPU, started like nohup (its own
session, stdout and stderr appended to nohup.out), saving 4 MiB every 0.5 s into a 64 MiB
loop ext4 that `watch --processes --record` watches. One dies of Errno 28, one is killed
with SIGKILL, one exits 0."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.record.scenarios import CLI, ENV, ROOT, history
from tests.record.test_why import connector_opens
from tests.support.env import need, need_root
from tests.support.mounts import wait_until

SCRIPT = str(ROOT / "tests/record/save_only.py")


def _events(store: Path) -> str:
    try:
        return history(store, "events", "--format", "csv")
    except AssertionError:  # the store is being created
        return ""


def _nohup(mode: str, directory: Path, cwd: Path) -> subprocess.Popen:
    """``nohup python save_only.py DIR MODE &``: its own session, output appended."""
    with open(cwd / "nohup.out", "ab") as out:
        return subprocess.Popen(
            [sys.executable, SCRIPT, str(directory), mode],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=cwd,
            env=ENV,
            start_new_session=True,
        )


def test_a_plain_script_s_three_endings_are_told(loop_ext4, tmp_path: Path) -> None:
    need_root()  # fanotify (core.processes.writes) needs CAP_SYS_ADMIN
    need(connector_opens(), "needs the process connector for exit statuses")
    disk = loop_ext4(size_mb=64)
    store = tmp_path / "state" / "history.sqlite"
    watch = subprocess.Popen(
        [
            *CLI,
            *("watch", "--processes", "--interval", "0.5", "--record", "--record-every", "0.5"),
            *("--store", str(store), "--json", str(disk.mountpoint)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=tmp_path,
    )
    pids = {}
    try:
        seen = lambda pid: f"save_only.py (pid {pid}) is training" in _events(store)  # noqa: E731
        ended = lambda pid: f"save_only.py (pid {pid}) ended" in _events(store)  # noqa: E731
        killed = _nohup("forever", disk.mountpoint, tmp_path)
        pids["killed"] = killed.pid
        assert wait_until(lambda: seen(killed.pid), timeout=60), _events(store)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        (disk.mountpoint / "state.npy").unlink()
        clean = _nohup("exit0", disk.mountpoint, tmp_path)
        pids["clean"] = clean.pid
        assert clean.wait(timeout=60) == 0
        full = _nohup("full", disk.mountpoint, tmp_path)
        pids["full"] = full.pid
        assert full.wait(timeout=120) == 1
        assert b"Errno 28" in (tmp_path / "nohup.out").read_bytes()
        for pid in pids.values():
            assert wait_until(lambda p=pid: ended(p), timeout=60), (pid, _events(store))
    finally:
        watch.send_signal(signal.SIGKILL)  # the recorder dies; a new process reads history
        watch.wait(timeout=30)
    told = {k: history(store, "why", str(pid)).strip() for k, pid in pids.items()}
    for line in told.values():
        print(line)
        assert len(line.splitlines()) == 1, line
        assert re.match(r"save_only\.py ended at \d\d:\d\d:\d\d after \d+ s", line), line
    assert "; no cause seen (killed by SIGKILL" in told["killed"], told["killed"]
    assert told["clean"].endswith(": it exited normally (status 0)"), told["clean"]
    assert f": {disk.mountpoint} was full (" in told["full"], told["full"]
    assert "Errno 28" in told["full"] and "exit status 1" in told["full"], told["full"]
    # the killed one's end says nothing of the others' lines in the nohup.out they shared
    assert "Errno 28" not in told["killed"] + told["clean"]
