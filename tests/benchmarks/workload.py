"""A synthetic training step and the on/off alternation used by row 3.

Plain code with no trainwatch import: it runs unchanged in a subprocess and inside a real
kernel (``from tests.benchmarks.workload import ...``), so both variants measure the same loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path


class TrainingStep:
    """One step of about 10 ms: CPU compute (numpy matmuls, which release the GIL like a
    framework's kernels, and a little pure Python, which holds it), read 1 MiB of a data
    file, append a log line, write a small checkpoint (64 KiB, atomically replaced)."""

    def __init__(self, workdir: str, data_mib: int = 64) -> None:
        import numpy as np

        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_path = self.dir / "data.bin"
        if not self.data_path.exists() or self.data_path.stat().st_size < data_mib << 20:
            with open(self.data_path, "wb") as f:
                for _ in range(data_mib):
                    f.write(os.urandom(1 << 20))
        self.data_size = data_mib << 20
        self.data_fd = os.open(self.data_path, os.O_RDONLY)
        self.log = open(self.dir / "train.log", "a")  # noqa: SIM115 - kept open like a logger
        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((256, 256)).astype(np.float32)
        self.b = rng.standard_normal((256, 256)).astype(np.float32)
        self.ckpt = os.urandom(64 << 10)
        self.i = 0

    def __call__(self) -> None:
        c = self.a
        for _ in range(6):
            c = (c @ self.b) * 0.01
        loss = float(c[0, 0]) + sum(k * k for k in range(10000))
        offset = (self.i << 20) % self.data_size
        os.pread(self.data_fd, 1 << 20, offset)
        self.log.write(f"step {self.i} loss {loss:.6f}\n")
        self.log.flush()
        tmp = self.dir / "ckpt.pt.tmp"
        with open(tmp, "wb") as f:
            f.write(self.ckpt)
        os.replace(tmp, self.dir / "ckpt.pt")
        self.i += 1

    def close(self) -> None:
        os.close(self.data_fd)
        self.log.close()


def alternate(
    step: Callable[[], None],
    turn_on: Callable[[], None],
    turn_off: Callable[[], None],
    pairs: int,
    block_s: float,
    other_cpu: Callable[[], float] | None = None,
) -> dict:
    """Run the loop in blocks of ``block_s`` seconds with monitoring off and on, alternating
    the order within each pair (off/on, on/off, ...) so drift hits both sides equally; record
    seconds per step of each block (steps until the block's time is up, divided into the time
    they really took).

    ``block_s`` should be a whole number of sampler intervals: turning on ticks at once, so a
    block of k intervals sees exactly k ticks, as a running sampler would.
    ``other_cpu()`` (optional) returns CPU seconds used by everything except the loop's own
    thread; its increase per block is recorded too (a low-noise view of the same cost).
    """
    for _ in range(20):  # warm caches and the allocator
        step()
    off_times: list[float] = []
    on_times: list[float] = []
    steps_total = 0
    cpu = {"on": 0.0, "off": 0.0}
    wall = {"on": 0.0, "off": 0.0}
    for k in range(pairs):
        order = (False, True) if k % 2 == 0 else (True, False)
        for on in order:
            (turn_on if on else turn_off)()
            c0 = other_cpu() if other_cpu else 0.0
            t0 = time.perf_counter()
            end = t0 + block_s
            n = 0
            while True:
                step()
                n += 1
                if (now := time.perf_counter()) >= end:
                    break
            dt = now - t0
            c1 = other_cpu() if other_cpu else 0.0
            (on_times if on else off_times).append(dt / n)
            key = "on" if on else "off"
            cpu[key] += c1 - c0
            wall[key] += dt
            steps_total += n
    turn_off()
    return {
        "steps_per_block": round(steps_total / (2 * pairs)),
        "off": off_times,
        "on": on_times,
        "wall_on_s": wall["on"],
        "wall_off_s": wall["off"],
        "other_cpu_on_s": cpu["on"],
        "other_cpu_off_s": cpu["off"],
    }


def alternate_json(*args, **kwargs) -> str:
    return json.dumps(alternate(*args, **kwargs))


def other_cpu_probe() -> Callable[[], float]:
    """CPU seconds of this process tree (all threads, child processes) minus the calling
    thread: what monitoring costs besides the loop, read from schedstat (ns)."""
    import psutil

    me = os.getpid()
    main_tid = threading.get_native_id()
    last: dict[tuple[int, int], int] = {}

    def read() -> float:
        pids = [me]
        with contextlib.suppress(psutil.Error):
            pids += [c.pid for c in psutil.Process(me).children(recursive=True)]
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                if pid == me and int(tid) == main_tid:
                    continue
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        last[(pid, int(tid))] = int(f.read().split()[0])
                except (OSError, ValueError):
                    continue
        return sum(last.values()) / 1e9

    return read
