"""A synthetic training step and the on/off alternation used by row 3.

Plain code with no trainwatch import: it runs unchanged in a subprocess and inside a real
kernel (``from tests.benchmarks.workload import ...``), so both variants measure the same loop.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path


class TrainingStep:
    """One step: CPU compute (numpy matmul + a little Python), read 1 MiB of a data file,
    append a log line, write a small checkpoint (256 KiB, atomically replaced)."""

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
        self.a = rng.standard_normal((192, 192)).astype(np.float32)
        self.b = rng.standard_normal((192, 192)).astype(np.float32)
        self.ckpt = os.urandom(256 << 10)
        self.i = 0

    def __call__(self) -> None:
        c = self.a
        for _ in range(4):
            c = (c @ self.b) * 0.01
        loss = float(c[0, 0]) + sum(k * k for k in range(3000))
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
) -> dict:
    """Time blocks of a fixed number of steps with monitoring off and on, alternating the
    order within each pair (off/on, on/off, ...) so drift hits both sides equally.

    ``block_s`` should be a whole number of sampler intervals: turning on ticks at once, so a
    block of k intervals sees exactly k ticks, as a running sampler would.
    """
    for _ in range(10):  # warm caches and the allocator
        step()
    t0 = time.perf_counter()
    for _ in range(20):
        step()
    per_step = (time.perf_counter() - t0) / 20
    steps = max(10, round(block_s / per_step))
    off_times: list[float] = []
    on_times: list[float] = []
    for k in range(pairs):
        order = (False, True) if k % 2 == 0 else (True, False)
        for on in order:
            (turn_on if on else turn_off)()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            dt = time.perf_counter() - t0
            (on_times if on else off_times).append(dt)
    turn_off()
    return {"steps_per_block": steps, "off": off_times, "on": on_times}


def alternate_json(*args, **kwargs) -> str:
    return json.dumps(alternate(*args, **kwargs))
