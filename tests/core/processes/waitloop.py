"""A training-loop stand-in that times its own storage calls (issue 15's accuracy proof).

Run as a child process: ``python -m tests.core.processes.waitloop MODE DIR --duty D --seconds S
--out
FILE``. Each iteration spins the CPU in Python, then makes its storage call and times it:

- ``fsync``: write 4 KiB to DIR/loop.log and fsync it (a TensorBoard flush on a share);
- ``read``: pread 64 KiB at a random offset of DIR/data.bin, then drop that range from the
  page cache (posix_fadvise DONTNEED, not timed), so every read goes to the device;
- ``cpu``: no storage call at all.

The rest of an iteration lasts ``call * (1 - D) / D``, so the time inside storage calls is
the fraction D of the wall time whatever a call costs; with ``--idle Q`` the fraction Q of
it is a sleep on no file (time.sleep: the loop waiting on a queue or the GPU), the rest spin.
FILE gets the calls as ``[start, end]`` wall-clock pairs (time.time()): the truth a
measurement is checked against over any span. The loop writes ``ready`` to stdout when it
starts, so the watcher can begin; SIGTERM ends it early (after the call in flight), its calls
still written, so a watcher can stop it once it has measured enough.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

BLOCK = 64 * 1024


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def storage_call(mode: str, fd: int, size: int, rng: random.Random) -> tuple[float, float]:
    """One timed call: (start, end) wall-clock seconds around the storage system calls."""
    if mode == "fsync":
        start = time.time()
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
        return start, time.time()
    offset = rng.randrange(0, max(1, size // BLOCK)) * BLOCK
    start = time.time()
    os.pread(fd, BLOCK, offset)
    done = time.time()
    os.posix_fadvise(fd, offset, BLOCK, os.POSIX_FADV_DONTNEED)  # untimed: not a wait
    return start, done


def run(
    mode: str, where: str, duty: float, seconds: float, idle: float = 0.0
) -> list[tuple[float, float]]:
    rng = random.Random(15)
    fd, size = -1, 0
    if mode == "fsync":
        fd = os.open(os.path.join(where, "loop.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    elif mode == "read":
        fd = os.open(os.path.join(where, "data.bin"), os.O_RDONLY)
        size = os.fstat(fd).st_size
    calls: list[tuple[float, float]] = []
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    print("ready", flush=True)
    end = time.time() + seconds
    try:
        while time.time() < end and not stop:
            if mode == "cpu":
                spin(0.05)
                continue
            start, done = storage_call(mode, fd, size, rng)
            calls.append((start, done))
            whole = (done - start) / duty  # this iteration's length
            time.sleep(whole * idle)  # asleep, but on no file (a queue, the GPU)
            spin(whole * (1 - duty - idle))
    finally:
        if fd >= 0:
            os.close(fd)
    return calls


def truth(calls: list[tuple[float, float]], start: float, end: float) -> float:
    """Fraction of ``[start, end]`` spent inside the loop's storage calls."""
    inside = sum(max(0.0, min(b, end) - max(a, start)) for a, b in calls)
    return inside / (end - start) if end > start else 0.0


ROOT = Path(__file__).resolve().parents[3]
BLKIO_V1 = "/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device"


def start(
    mode: str, where: str, duty: float, seconds: float, out: str, idle: float = 0.0
) -> subprocess.Popen[str]:
    """The loop in a child process, first in line for a CPU, once it said ``ready``.

    Why the priority: on a shared 2-CPU machine (load 4-6 while other suites run) a woken
    thread waits 1-2 ms for a CPU, and the loop's own clock counts that wait inside its
    call; it is CPU contention, not storage, and this test is about storage. A session of
    its own is an autogroup of its own, whose weight ``nice -10`` raises (plain nice only
    counts inside one autogroup)."""
    loop_options = ["--duty", str(duty), "--idle", str(idle), "--seconds", str(seconds)]
    loop_options += ["--out", out]
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.core.processes.waitloop", mode, where, *loop_options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        with open(f"/proc/{child.pid}/autogroup", "w") as fh:
            fh.write("-10")
    except OSError:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, child.pid, -10)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


@contextlib.contextmanager
def read_iops_limit(device: str, iops: int) -> Iterator[bool]:
    """Limit reads from block ``device`` ("loop3") to ``iops`` per second (blkio throttle,
    cgroup v1 root), so each read waits for the device as on a hard disk; yields False
    where the kernel offers no such limit. Why: this VM's disk answers a 64 KiB read in
    0.2 ms, which leaves a read mostly CPU (the page-cache copy), not a wait."""
    try:
        with open(f"/sys/block/{device}/dev") as fh:
            numbers = fh.read().strip()
        with open(BLKIO_V1, "w") as fh:
            fh.write(f"{numbers} {iops}")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        with open(BLKIO_V1, "w") as fh:
            fh.write(f"{numbers} 0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="waitloop")
    parser.add_argument("mode", choices=["fsync", "read", "cpu"])
    parser.add_argument("dir")
    parser.add_argument("--duty", type=float, default=0.3)
    parser.add_argument("--idle", type=float, default=0.0, help="fraction asleep on no file")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    calls = run(args.mode, args.dir, args.duty, args.seconds, args.idle)
    with open(args.out, "w") as fh:
        json.dump(calls, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
