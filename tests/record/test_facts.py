"""One event per fact per machine (core.record.facts): several writers on one store, real
processes each sampling the same disk, and the rules on their own."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from tests.record.scenarios import CLI, ENV, history
from trainwatch_lab.core.record import Event, Store


def test_three_writers_on_one_store_tell_each_warning_once(loop_ext4, tmp_path: Path) -> None:
    """Three `watch --record` at once on one store and one 24 MiB disk 90 % full
    (disk-almost-full) on a machine without NVIDIA GPU (gpu-unavailable): each warning is
    raised once, not three times."""
    disk = loop_ext4(size_mb=24)
    with open(disk.mountpoint / "filler", "wb") as fh:  # ~90 % used
        fh.write(b"\0" * (19 << 20))
    store = tmp_path / "h.sqlite"
    watch = [
        *CLI,
        *("watch", "--interval", "0.2", "--duration", "6", "--record", "--record-every", "0.2"),
        *("--store", str(store), "--json", str(disk.mountpoint)),
    ]
    writers = [
        subprocess.Popen(watch, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
        for _ in range(3)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode in (0, 1), err  # 1: a warning was seen
    lines = history(store, "events", "--format", "csv").splitlines()
    raised = Counter(tuple(line.split(",")[1:3]) for line in lines if ",warning-raised," in line)
    print(raised)
    mine = [k for k in raised if k[1] == str(disk.mountpoint)]
    assert mine, lines  # the disk's warning was recorded at all
    assert set(raised.values()) == {1}, raised


def _writer(path: Path) -> Store:
    store = Store(str(path), role="t")
    store.register()
    return store


def _raised(t: float, code: str = "disk-almost-full") -> Event:
    return Event(t, "warning-raised", "/data", f"{code}: /data", {"code": code})


def _cleared(t: float, code: str = "disk-almost-full") -> Event:
    return Event(t, "warning-cleared", "/data", f"{code} cleared", {"code": code})


def test_a_warning_s_state_is_told_when_it_changes_whoever_tells_it(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    a, b = _writer(path), _writer(path)
    t = 1_800_000_000.0
    assert b.add_events([_raised(t + 1)]) == 1
    assert a.add_events([_raised(t), _cleared(t + 300)]) == 1  # b told the raise (later!)
    assert b.add_events([_cleared(t + 310)]) == 0  # a told the clear
    assert b.add_events([_raised(t + 900)]) == 1  # raised again: a new fact
    assert a.add_events([_raised(t + 900, "disk-filling")]) == 1  # another code: its own
    kinds = [(e.kind, e.data["code"]) for e in a.events(0, 2e9)]
    assert kinds == [
        ("warning-raised", "disk-almost-full"),
        ("warning-cleared", "disk-almost-full"),
        ("warning-raised", "disk-almost-full"),
        ("warning-raised", "disk-filling"),
    ]
    a.close()
    b.close()


def test_a_raise_by_a_writer_long_gone_is_told_again(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    a = _writer(path)
    t = 1_800_000_000.0
    a.add_events([_raised(t)])
    with a.transaction() as con:  # the writer died (its pid now another's, or none)
        con.execute("UPDATE writers SET pid = 0 WHERE id = ?", (a.writer_id,))
    b = _writer(path)
    assert b.add_events([_raised(t + 30)]) == 0  # the same moment: one fact
    assert b.add_events([_raised(t + 3600)]) == 1  # an hour later: told again
    a.close()
    b.close()


def test_a_process_s_end_is_told_once_and_a_reused_pid_is_another(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    a, b = _writer(path), _writer(path)
    t = 1_800_000_000.0
    end = {"pid": 7, "start_ticks": 1234, "name": "train.py"}
    ev = Event(t, "process-ended", "train.py", "train.py (pid 7) ended", end)
    assert a.add_events([ev]) == 1
    assert b.add_events([Event(t + 2, ev.kind, ev.subject, ev.text, end)]) == 0
    other = {**end, "start_ticks": 9999}
    assert b.add_events([Event(t + 50, ev.kind, ev.subject, ev.text, other)]) == 1
    run = Event(t, "run-ended", "train.py", "train.py (pid 7) ended", end)
    assert b.add_events([run]) == 1  # the wrapper's record is its own
    a.close()
    b.close()
