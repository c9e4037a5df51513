"""core.procfile: kept /proc descriptors read fresh values, follow processes, and get closed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainwatch_lab.core.procfile import ProcFile, ProcFiles


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_kept_descriptor_reads_the_current_values() -> None:
    io = ProcFile(f"/proc/{os.getpid()}/io")
    try:
        before = int(io.read().split(b"wchar:")[1].split()[0])
        with open(os.devnull, "wb") as sink:
            sink.write(b"x" * 1_000_000)
        after = int(io.read().split(b"wchar:")[1].split()[0])
        assert after - before >= 1_000_000
    finally:
        io.close()


def test_a_process_that_is_gone_raises_and_keeps_nothing_open() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stat = ProcFile(f"/proc/{child.pid}/stat")
    fds = open_fds()
    try:
        assert str(child.pid).encode() in stat.read()
        assert len(open_fds() - fds) == 1  # kept
        child.kill()
        child.wait()
        with pytest.raises(OSError):
            stat.read()  # never the text of whatever reuses the pid
        assert open_fds() - fds == set()
    finally:
        child.kill()
        stat.close()


def test_sweep_closes_what_was_not_read_since_the_last_sweep() -> None:
    files = ProcFiles()
    fds = open_fds()
    try:
        files.read("/proc/self/stat")
        files.read("/proc/self/io")
        files.sweep()
        assert len(files) == 2 and len(open_fds() - fds) == 2
        files.read("/proc/self/io")
        files.sweep()
        assert len(files) == 1 and len(open_fds() - fds) == 1
    finally:
        files.close()
    assert open_fds() - fds == set()


def test_no_more_than_the_limit_is_kept_and_nothing_after_close() -> None:
    """Kept descriptors count against the user's open-file limit: past ``limit`` (and once
    closed) files are opened per read, and still read correctly."""
    files = ProcFiles(limit=2)
    fds = open_fds()
    try:
        paths = ["/proc/self/stat", "/proc/self/io", "/proc/self/status", "/proc/self/limits"]
        for path in paths:
            assert files.read(path)
        assert len(files) == 2 and len(open_fds() - fds) == 2
        assert files.read_fresh("/proc/self/status")[1]  # not kept: opened for this read
        files.close()
        assert b"Max open files" in files.read("/proc/self/limits")
        assert open_fds() - fds == set()
    finally:
        files.close()
