"""Process-tree I/O rates against real child processes that write, fsync, read and exit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.processes.io import ProcessIOSource

MIB = 1024 * 1024

# A tiny command interpreter run as child (and grandchild): the test tells it what I/O to do
# between two readings, so we know exactly which bytes fall into which interval.
WORKER = r"""
import os, signal, subprocess, sys
d = sys.argv[1]
grand = None
def write(mib, name):
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"x" * (1 << 20)
    for _ in range(mib):
        os.write(fd, block)
    os.fsync(fd)
    os.close(fd)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "write":
        write(int(args[0]), f"w{os.getpid()}.bin")
    elif cmd == "read":
        with open(os.path.join(d, "input.bin"), "rb") as f:
            while f.read(1 << 20):
                pass
    elif cmd == "run":  # a grandchild born and reaped between two readings
        subprocess.run([sys.executable, sys.argv[0], d], input=f"write {args[0]}\n",
                       text=True, check=True, stdout=subprocess.DEVNULL)
    elif cmd == "start":
        grand = subprocess.Popen([sys.executable, sys.argv[0], d], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
    elif cmd == "g":
        grand.stdin.write(" ".join(args) + "\n")
        grand.stdin.flush()
        grand.stdout.readline()
    elif cmd == "ignorechld":  # children are reaped by the kernel, never folded into ours
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    elif cmd == "reap":
        grand.stdin.close()
        grand.wait()
    print("ok", flush=True)
"""


class Worker:
    def __init__(self, script: Path, workdir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, command: str) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", f"worker failed on {command!r}"

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Clock:
    """time.monotonic, remembering each reading so the test knows the intervals."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self) -> float:
        self.times.append(time.monotonic())
        return self.times[-1]

    def last_dt(self) -> float:
        return self.times[-1] - self.times[-2]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    (tmp_path / "input.bin").write_bytes(os.urandom(4 * MIB))
    w = Worker(script, tmp_path)
    try:
        w.do("noop")  # started and ready: its start-up reads are before our first reading
        yield w
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait(timeout=60)


def tick(src: ProcessIOSource) -> Sample:
    s = Sample(t=time.time())
    src.collect(s)
    assert s.process is not None, s.notes
    return s


def on_block_device(path: Path) -> bool:
    return os.major(os.stat(path).st_dev) != 0  # tmpfs/overlay have anonymous devices


def test_child_writes_and_reads_are_counted_once(worker: Worker, tmp_path: Path) -> None:
    clock = Clock()
    src = ProcessIOSource(clock=clock)
    first = tick(src)
    assert first.process is not None
    assert (first.process.write_chars_s, first.process.read_chars_s) == (0.0, 0.0)
    assert first.process.pids >= 2 and first.process.pid == os.getpid()

    worker.do("write 8")
    worker.do("read")
    s = tick(src)
    assert s.process is not None
    dt = clock.last_dt()
    written = s.process.write_chars_s * dt
    assert 8 * MIB - 64 * 1024 <= written <= 8.5 * MIB  # the child's 8 MiB
    # the child's 4 MiB; our own reads (pipes, /proc) are left out, give or take a tick's
    assert s.process.read_chars_s * dt >= 4 * MIB - 64 * 1024
    if on_block_device(tmp_path):
        assert 7 * MIB <= s.process.write_bytes_s * dt <= 10 * MIB  # fsync'ed to the disk

    worker.close()  # the child exits and we reap it: the kernel adds its totals to ours
    s = tick(src)
    assert s.process is not None
    for rate in ("read_chars_s", "write_chars_s", "read_bytes_s", "write_bytes_s"):
        assert getattr(s.process, rate) >= 0
    assert s.process.write_chars_s * clock.last_dt() < 0.5 * MIB  # not counted a second time
    assert s.process.write_bytes_s * clock.last_dt() < 0.5 * MIB


def test_grandchildren_are_followed_and_their_exit_does_not_spike(worker: Worker) -> None:
    worker.do("start")
    clock = Clock()
    src = ProcessIOSource(clock=clock)
    first = tick(src)
    assert first.process is not None and first.process.pids >= 3

    worker.do("g write 6")
    s = tick(src)
    assert s.process is not None
    assert 6 * MIB <= s.process.write_chars_s * clock.last_dt() <= 6.5 * MIB

    worker.do("reap")  # the grandchild exits; the child folds its counters in
    s = tick(src)
    assert s.process is not None
    assert s.process.pids == first.process.pids - 1
    assert 0 <= s.process.write_chars_s * clock.last_dt() < 0.5 * MIB


def test_a_grandchild_born_and_gone_between_readings_counts_once(worker: Worker) -> None:
    clock = Clock()
    src = ProcessIOSource(clock=clock)
    tick(src)
    worker.do("run 5")
    s = tick(src)
    assert s.process is not None
    assert 5 * MIB <= s.process.write_chars_s * clock.last_dt() <= 5.5 * MIB
    s = tick(src)
    assert s.process is not None
    assert 0 <= s.process.write_chars_s * clock.last_dt() < 0.5 * MIB


def test_a_parent_that_ignores_sigchld_is_not_muted_for_long(worker: Worker) -> None:
    worker.do("ignorechld")
    worker.do("start")
    clock = Clock()
    src = ProcessIOSource(clock=clock)
    first = tick(src)
    assert first.process is not None
    worker.do("g write 2")
    tick(src)  # counts the grandchild's 2 MiB
    worker.do("reap")  # no jump will come: the kernel discards the grandchild's counters
    deadline = time.monotonic() + 30
    while (s := tick(src)).process is not None and s.process.pids >= first.process.pids:
        assert time.monotonic() < deadline, "the grandchild did not go away"
        time.sleep(0.05)
    for _ in range(3):  # the credit for the grandchild's 2 MiB expires unused
        tick(src)
    worker.do("write 3")
    s = tick(src)
    assert s.process is not None
    assert 3 * MIB <= s.process.write_chars_s * clock.last_dt() <= 3.5 * MIB


def test_children_false_watches_only_the_process(worker: Worker) -> None:
    clock = Clock()
    src = ProcessIOSource(children=False, clock=clock)
    first = tick(src)
    assert first.process is not None and first.process.pids == 1
    worker.do("write 4")
    s = tick(src)
    assert s.process is not None and s.process.pids == 1
    assert s.process.write_chars_s * clock.last_dt() < 0.5 * MIB


def test_watching_another_process_by_pid(worker: Worker) -> None:
    clock = Clock()
    src = ProcessIOSource(pid=worker.proc.pid, clock=clock)
    tick(src)
    worker.do("write 3")
    s = tick(src)
    assert s.process is not None and s.process.pid == worker.proc.pid
    assert 3 * MIB <= s.process.write_chars_s * clock.last_dt() <= 3.2 * MIB


def test_a_process_that_is_gone_is_a_note() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    src = ProcessIOSource(pid=child.pid)
    s = Sample(t=0)
    src.collect(s)
    assert s.process is None
    assert str(child.pid) in s.notes["process"]


def test_the_sampler_threads_own_reads_are_not_the_jobs(tmp_path: Path) -> None:
    """Watching ourselves: reads by the collecting thread (like the sampler's /proc walks)
    are left out; reads by another thread of the process are counted."""
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(4 * 1024 * 1024))
    ticks = iter(range(100))
    source = ProcessIOSource(pid=os.getpid(), children=False, clock=lambda: float(next(ticks)))
    read_in_interval: dict[str, float] = {}

    def sampler_thread(label: str, reader: str) -> None:
        source.collect(Sample(t=0.0))
        if reader == "sampler":
            blob.read_bytes()
        else:
            other = threading.Thread(target=blob.read_bytes)
            other.start()
            other.join()
        sample = Sample(t=1.0)
        source.collect(sample)  # the fake clock makes this interval exactly 1 s
        assert sample.process is not None
        read_in_interval[label] = sample.process.read_chars_s

    for label in ("sampler", "other"):
        t = threading.Thread(target=sampler_thread, args=(label, label))
        t.start()
        t.join()
    assert read_in_interval["sampler"] < 512 * 1024
    assert read_in_interval["other"] >= 4 * 1024 * 1024


def test_reads_of_our_other_threads_are_not_the_jobs(tmp_path: Path) -> None:
    """core.processes.waits reads /proc ten times a second on a thread of its own: that thread's
    reads (any thread trainwatch names ``trainwatch-*``) are not the job's either."""
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(4 * 1024 * 1024))
    ticks = iter(range(100))
    source = ProcessIOSource(pid=os.getpid(), children=False, clock=lambda: float(next(ticks)))
    go, done, leave = threading.Event(), threading.Event(), threading.Event()

    def look() -> None:  # alive at both readings, as the sampling thread is
        go.wait(10)
        blob.read_bytes()
        done.set()
        leave.wait(10)

    ours = threading.Thread(target=look, name="trainwatch-waits")
    ours.start()
    source.collect(Sample(t=0.0))
    go.set()
    done.wait(10)
    sample = Sample(t=1.0)
    source.collect(sample)
    leave.set()
    ours.join()
    assert sample.process is not None and sample.process.read_chars_s < 512 * 1024


def test_descendants_match_psutil_for_a_real_tree() -> None:
    """The /proc children walk finds the same tree as psutil's full scan of /proc."""
    import psutil

    from trainwatch_lab.core.processes.io import _descendants

    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
        "time.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        root = psutil.Process()
        deadline = time.monotonic() + 10
        while len(root.children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = {p.pid for p in root.children(recursive=True)}
        assert len(expected) >= 2
        assert set(_descendants(root.pid)) == expected
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()


def test_the_process_source_says_when_the_work_began() -> None:
    """A real process: running_since is its start (seconds ago, not since boot); with a
    kernel's tracker hooked in, the running cell's start, and "cell"."""
    import subprocess
    import sys
    import time

    from trainwatch_lab.core.processes.io import ProcessIOSource

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        source = ProcessIOSource(pid=child.pid, children=False)
        sample = Sample(t=time.time())
        source.collect(sample)
        assert sample.process is not None and sample.process.running_what == "process"
        assert sample.process.running_since is not None
        assert 0 <= sample.t - sample.process.running_since < 20  # started just now
        source.busy_since = lambda: 1234.5
        sample = Sample(t=time.time())
        source.collect(sample)
        assert sample.process is not None
        assert (sample.process.running_since, sample.process.running_what) == (1234.5, "cell")
        source.close()
    finally:
        child.kill()
        child.wait()
