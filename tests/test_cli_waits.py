"""``trainwatch-lab watch --pid PID PATH...``: another process's time lost to storage."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WAITER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print("ready", flush=True)
fcntl.flock(fd, fcntl.LOCK_EX)  # blocks: the test holds the lock
"""


@pytest.fixture
def waiter(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(pid, dir): a process blocked for good in flock on a file in ``dir``."""
    share = tmp_path / "share"
    share.mkdir()
    lock = share / "lock"
    lock.write_text("")
    held = os.open(lock, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    child = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    yield child.pid, share
    child.kill()
    child.wait()
    os.close(held)


def watch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "watch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_watch_pid_json_reports_the_waits_per_path(waiter: tuple[int, Path]) -> None:
    pid, share = waiter
    out = watch("--pid", str(pid), "--json", "--duration", "4.5", "--interval", "1", str(share))
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines, out.stderr
    measured = [line["process"] for line in lines if line["process"]["waits"]]
    assert measured, lines[-1]["process"]
    last = measured[-1]
    assert last["pid"] == pid
    assert last["waits"][str(share)] == pytest.approx(1.0, abs=0.05)
    assert last["wait_calls"][str(share)] == {"flock": last["waits"][str(share)]}
    assert last["wait_files"][str(share)] == str(share / "lock")
    assert last["worker_waits"] == {} and last["wait_samples"] >= 5  # 10 looks a second


def test_watch_pid_table_says_where_the_process_waits(waiter: tuple[int, Path]) -> None:
    pid, share = waiter
    out = watch("--pid", str(pid), "--duration", "3.5", "--interval", "1", str(share))
    assert f"pid {pid} waiting on storage: {share} 100 % (flock)" in out.stdout, out.stdout


def test_watch_pid_of_no_process_is_bad_usage(tmp_path: Path) -> None:
    out = watch("--pid", "999999999", str(tmp_path))
    assert out.returncode == 2
    assert "no process 999999999 runs here" in out.stderr
