"""A plain script that only writes into a watched path is a run, and its end is told after
the recorder restarts (issue 35 item 1): no TensorBoard, no GPU, started like nohup (its own
session, stdout and stderr appended to nohup.out), saving 4 MiB every 0.5 s into a 64 MiB
loop ext4 that `watch --processes --record` watches. One is killed with SIGKILL, one exits
0, one dies of Errno 28 (tests/record/scenarios.py: plain_script_endings)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.record.scenarios import history, plain_script_endings, recording_watch, store_events
from tests.record.test_why import connector_opens
from tests.support.env import need, need_root


def test_a_plain_script_s_three_endings_are_told(loop_ext4, tmp_path: Path) -> None:
    need_root()  # fanotify (core.processes.writes) needs CAP_SYS_ADMIN
    need(connector_opens(), "needs the process connector for exit statuses")
    disk = loop_ext4(size_mb=64)
    store = tmp_path / "state" / "history.sqlite"
    with recording_watch(store, disk.mountpoint, tmp_path):
        pids = plain_script_endings(store_events(store), disk.mountpoint, tmp_path)
    told = {k: history(store, "why", str(pid)).strip() for k, pid in pids.items()}
    for line in told.values():
        print(line)
        assert len(line.splitlines()) == 1, line
        assert re.match(r"save_only\.py ended at \d\d:\d\d:\d\d after \d+ s", line), line
    assert "; no cause seen (killed by SIGKILL" in told["killed"], told["killed"]
    assert told["clean"].endswith(": it exited normally (status 0)"), told["clean"]
    assert f": {disk.mountpoint} was full (" in told["full"], told["full"]
    assert "Errno 28" in told["full"] and "exit status 1" in told["full"], told["full"]
    # the others' ends say nothing of the Errno 28 line in the nohup.out they all appended to
    assert "Errno 28" not in told["killed"] + told["clean"]
