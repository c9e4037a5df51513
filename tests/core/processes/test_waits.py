"""Time lost to storage (core.processes.waits): decoding, attribution, and real blocked processes.

The real cases block a child deterministically, with no mount: in ``flock`` on a file a test
holds locked (a wait on a file, like a lock on NFS), in ``openat`` of a FIFO (a path
argument read from the child's memory) and in ``read`` of a pipe (a wait, but not on
storage). The accuracy against a loop on real slow storage is test_waits_accuracy.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import PathState, ProcessIO, Sample
from trainwatch_lab.core.processes.threadwait import AT_FDCWD, Call, decode_call, read_c_string
from trainwatch_lab.core.processes.waitlook import storage_file
from trainwatch_lab.core.processes.waits import WaitSampler, WaitSource, owner, split

ROOT = Path(__file__).resolve().parents[3]


def test_decode_call_names_the_file_argument() -> None:
    fdcwd = "0xffffffffffffff9c"
    assert decode_call("running") is None
    assert decode_call("-1 0x7ffd 0x7f12") == Call("no system call")
    assert decode_call("74 0x3 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f", "x86_64") == Call("fsync", fd=3)
    openat = decode_call(f"257 {fdcwd} 0x55d0a0 0x0 0x0 0x0 0x0 0x7ffd 0x7f", "x86_64")
    assert openat == Call("openat", path_at=0x55D0A0, dirfd=AT_FDCWD)
    assert decode_call("4 0x55d0 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "x86_64") == Call(
        "stat", path_at=0x55D0
    )
    assert decode_call("56 0x7 0x4000 0x0 0x0 0x0 0x0 0x1 0x2", "aarch64") == Call(
        "openat", path_at=0x4000, dirfd=7
    )
    assert decode_call("202 0x1 0x2", "x86_64") == Call("syscall 202")  # futex: no file
    assert decode_call("74", "x86_64") == Call("fsync")  # arguments cut off


def test_read_c_string_reads_our_own_memory(tmp_path: Path) -> None:
    import ctypes

    text = ctypes.create_string_buffer(b"/mnt/share/runs/events.out\0garbage")
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        assert read_c_string(fd, ctypes.addressof(text)) == "/mnt/share/runs/events.out"
        assert read_c_string(fd, 0) is None  # unmapped
    finally:
        os.close(fd)


def test_storage_file_and_owner() -> None:
    assert storage_file("pipe:[1234]") is None
    assert storage_file("socket:[9]") is None
    assert storage_file("/dev/nvidia0") is None and storage_file("/proc/1/io") is None
    assert storage_file("/dev/shm/x") == "/dev/shm/x"
    assert storage_file("/data/a (deleted)") == "/data/a"
    watched = ["/data", "/data/runs", "/mnt/share"]
    assert owner("/data/runs/events", watched) == "/data/runs"  # the deepest
    assert owner("/data/train.bin", watched) == "/data"
    assert owner("/database/x", watched) is None  # a prefix of the name is no parent
    assert owner("/mnt/share", watched) == "/mnt/share"
    assert owner("/etc/x", ["/"]) == "/"


def test_split_divides_the_sleep_time_by_the_shares() -> None:
    shares = {
        ("/mnt/share/runs/ev", "fsync"): 0.5,
        ("/mnt/share/runs/ev", "write"): 0.1,
        ("/data/x.bin", "pread64"): 0.2,
        ("/etc/hosts", "read"): 0.1,
        (None, "syscall 202"): 0.1,  # a futex wait: not storage
    }
    out = split(0.5, shares, ["/mnt/share/runs", "/tmp"])
    assert out.waits == pytest.approx({"/mnt/share/runs": 0.3, "/tmp": 0.0})
    assert out.calls == {"/mnt/share/runs": pytest.approx({"fsync": 0.25, "write": 0.05})}
    assert out.files == {"/mnt/share/runs": "/mnt/share/runs/ev"}
    assert out.elsewhere == pytest.approx(0.15)
    assert out.other == pytest.approx(0.05)


def test_looks_pool_over_ticks_but_not_across_a_change_of_what_the_loop_sleeps_on() -> None:
    """Pooled looks give a 5 % duty cycle its split; a cell that stops fsyncing and sleeps
    must not have its new sleep split like the old fsyncs (the 4 s cell read 87-90 % for 75 %
    before; ticks that share nothing with this one's looks are the past)."""
    from collections import Counter

    from trainwatch_lab.core.processes.waits import _Tick

    fsync, nap = ("/mnt/share/ev", "fsync"), (None, "clock_nanosleep")
    source = WaitSource(pid=os.getpid())
    try:
        source._pool.extend(_Tick(t, Counter({fsync: 5}), Counter()) for t in range(4))
        source._pool.append(_Tick(4, Counter({nap: 5}), Counter()))
        assert source._shares("main") == {nap: 1.0}  # a change: this tick alone
        source._pool.append(_Tick(5, Counter({nap: 2, fsync: 3}), Counter()))
        assert source._shares("main")[fsync] > 0.5  # mixed: it pools with the past
        source._pool.append(_Tick(6, Counter({fsync: 1}), Counter()))
        shares = source._shares("main")  # too few looks to stand alone: pooled as before
        assert set(shares) == {fsync, nap} and sum(shares.values()) == pytest.approx(1.0)
    finally:
        source.close()


BLOCKED = r"""
import fcntl, os, sys, time
what, target = sys.argv[1], sys.argv[2]
if what == "flock":
    fd = os.open(target, os.O_RDWR)
    print("ready", flush=True)
    fcntl.flock(fd, fcntl.LOCK_EX)
elif what == "fifo":
    os.chdir(os.path.dirname(target))
    print("ready", flush=True)
    open(os.path.basename(target))  # openat of a relative path: blocks until a writer
elif what == "pipe":
    r, w = os.pipe()
    print("ready", flush=True)
    os.read(r, 1)
elif what == "worker":  # the main thread waits on a pipe, its worker on the lock
    r, w = os.pipe()
    if os.fork() == 0:
        fd = os.open(target, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os._exit(0)
    print("ready", flush=True)
    os.read(r, 1)
"""


def _blocked(what: str, target: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", BLOCKED, what, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(0.3)  # into the call
    return child


def _sample(pid: int, *paths: str) -> Sample:
    return Sample(
        t=time.time(),
        process=ProcessIO(pid, 1, 0, 0, 0, 0),
        paths={p: PathState(p) for p in paths},
    )


def _measure(source: WaitSource, pid: int, *paths: str, ticks: int = 3) -> Sample:
    sample = _sample(pid, *paths)
    for _ in range(ticks):
        sample = _sample(pid, *paths)
        source.collect(sample)
        time.sleep(0.5)
    return sample


@pytest.fixture
def locked(tmp_path: Path):
    """A file under tmp_path/share held locked by this test: flock on it blocks."""
    share = tmp_path / "share"
    share.mkdir()
    lock = share / "lock"
    lock.write_text("")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield lock
    os.close(fd)


def test_a_process_blocked_on_a_file_lock_waits_all_its_time_there(locked: Path) -> None:
    child = _blocked("flock", locked)
    source = WaitSource(pid=child.pid)
    try:
        sample = _measure(source, child.pid, str(locked.parent), "/elsewhere")
    finally:
        source.close()
        child.kill()
        child.wait()
    proc = sample.process
    assert proc is not None and proc.wait_samples >= 3
    assert source.sampler.period == 1 / DEFAULTS.wait_rate_hz  # storage: worth telling apart
    assert proc.waits[str(locked.parent)] == pytest.approx(1.0, abs=0.05)
    assert proc.waits["/elsewhere"] == 0.0
    assert list(proc.wait_calls[str(locked.parent)]) == ["flock"]
    assert proc.wait_files[str(locked.parent)] == str(locked)
    assert proc.waits_window[str(locked.parent)] == pytest.approx(1.0, abs=0.05)
    assert json.loads(json.dumps(sample.to_json()))["process"]["waits"] == proc.waits


def test_a_path_argument_is_read_from_the_process_memory(tmp_path: Path) -> None:
    fifo = tmp_path / "in" / "fifo"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    child = _blocked("fifo", fifo)
    sampler = WaitSampler(child.pid, rate_hz=20, idle_stop_s=5)
    try:
        text = Path(f"/proc/{child.pid}/task/{child.pid}/syscall").read_bytes()
        assert sampler.look(child.pid, text) == (str(fifo), "openat")
    finally:
        sampler.stop()
        child.kill()
        child.wait()


def test_a_wait_on_a_pipe_is_no_storage(tmp_path: Path) -> None:
    child = _blocked("pipe", tmp_path)
    source = WaitSource(pid=child.pid)
    try:
        proc = _measure(source, child.pid, str(tmp_path)).process
    finally:
        source.close()
        child.kill()
        child.wait()
    # idle on one thing that is no file (a kernel between cells): a look a second is enough
    assert source.sampler.period == 1 / DEFAULTS.wait_quiet_rate_hz
    assert proc is not None and proc.waits == {str(tmp_path): 0.0}
    assert proc.waits_elsewhere == 0.0 and proc.wait_calls == {}
    assert proc.wait_other == pytest.approx(1.0, abs=0.05)  # asleep, on no file


def test_workers_are_counted_apart(locked: Path) -> None:
    child = _blocked("worker", locked)
    source = WaitSource(pid=child.pid)
    try:
        proc = _measure(source, child.pid, str(locked.parent), ticks=4).process
    finally:
        source.close()
        for pid in source._workers():
            os.kill(pid, 9)
        child.kill()
        child.wait()
    assert proc is not None and proc.wait_workers == 1
    assert proc.waits[str(locked.parent)] == 0.0  # the main thread waits on its pipe
    assert proc.worker_waits[str(locked.parent)] == pytest.approx(1.0, abs=0.05)
    assert list(proc.worker_wait_calls[str(locked.parent)]) == ["flock"]


def test_a_gone_process_is_a_note_and_the_thread_stops_when_nobody_asks() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    source = WaitSource(pid=child.pid, defaults=replace(DEFAULTS, wait_idle_stop_s=0.3))
    try:
        sample = _measure(source, child.pid, "/data", ticks=2)
        assert sample.notes["waits"] == f"process {child.pid} has exited"
        assert sample.process is not None and sample.process.waits == {}
        time.sleep(2.0)  # (3 gaps between ticks: 1.5 s)
        assert source.sampler._thread is None  # stopped by itself
    finally:
        source.close()


IN_PROCESS = r"""
import fcntl, json, os, sys, threading, time
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import PathState, ProcessIO, Sample
from trainwatch_lab.core.processes.waits import WaitSource

lock = sys.argv[1]
source = WaitSource()  # this process: a notebook kernel watching itself

def tick():
    time.sleep(0.3)
    for _ in range(3):
        sample = Sample(t=0, process=ProcessIO(os.getpid(), 1, 0, 0, 0, 0),
                        paths={os.path.dirname(lock): PathState(os.path.dirname(lock))})
        source.collect(sample)
        time.sleep(0.5)
    print(json.dumps(sample.process.waits), flush=True)
    os._exit(0)

threading.Thread(target=tick, name="trainwatch-sampler").start()
fcntl.flock(os.open(lock, os.O_RDWR), fcntl.LOCK_EX)  # the main thread, blocked
"""


def test_a_kernel_watching_itself(locked: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(locked)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    waits = json.loads(out.stdout)
    assert waits[str(locked.parent)] == pytest.approx(1.0, abs=0.05)
