"""GPU tick cost: NVML calls per tick and the time one GpuSource.collect takes, 1 and 8 GPUs.

Runs the real pynvml bindings against the fake libnvidia-ml.so.1 (tests/core/fake_nvml), so the
numbers are our own overhead plus pynvml's ctypes marshalling; a real driver adds its own time
per call (microseconds for most). The fake blocks ~20 ms in each PCIe throughput read, as the
driver does while it samples the bus (the reason those are read every ``gpu_pcie_every_s``
only), so ticks that read PCIe cost what they would on a real GPU: the ``mean`` column carries
them, the median hides them. Call counts are exact either way.

Modes (each in a fresh subprocess with LD_LIBRARY_PATH at the fake):
- ``first``: the first tick (nvmlInit, enumeration, names, limits, processes, PCIe);
- ``steady``: later ticks when nothing slow is due (the common case);
- ``worst``: every cache expired on every tick (static fields, processes and PCIe each tick;
  at most 50 ticks: each costs 40 ms per GPU in PCIe reads alone);
- ``1s``: a simulated 1 s interval for 600 ticks with the real defaults (static every 60 s,
  processes and PCIe every 5 s): the average calls per tick and the cost distribution.

    python -m tests.benchmarks.bench_gpu [--ticks 600]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.core.fake_nvml import GIB, ROOT, FakeNvml, build, gpu

CHILD = r"""
import ctypes, dataclasses, json, os, statistics, sys, time
import trainwatch_lab.core.gpu.source as gpumod
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import Sample

mode, ticks = sys.argv[1], int(sys.argv[2])
lib = ctypes.CDLL("libnvidia-ml.so.1")
INF = float("inf")

class Clock:  # simulated monotonic clock for the 1 s cadence
    now = 1000.0
    @classmethod
    def monotonic(cls):
        return cls.now

if mode == "worst":
    d = dataclasses.replace(DEFAULTS, gpu_static_ttl_s=0, gpu_processes_every_s=0,
                            gpu_pcie_every_s=0)
elif mode == "steady":
    d = dataclasses.replace(DEFAULTS, gpu_static_ttl_s=INF, gpu_processes_every_s=INF,
                            gpu_pcie_every_s=INF)
else:
    d = DEFAULTS
if mode == "1s":
    gpumod.time = type("T", (), {"monotonic": staticmethod(Clock.monotonic)})
src = gpumod.GpuSource(pid=os.getpid(), defaults=d)
costs, ours, theirs = [], [], []
runs = 1 if mode == "first" else (min(ticks, 50) if mode == "worst" else ticks) + 1
for i in range(runs):
    a0, b0 = src.nvml_calls, lib.fake_nvml_calls()
    s = Sample(t=time.time())
    t0 = time.perf_counter()
    src.collect(s)
    dt = time.perf_counter() - t0
    assert s.gpus and "gpus" not in s.notes, s.notes
    if mode == "first" or i > 0:  # i == 0 is the first tick: reported by its own mode
        costs.append(dt)
        ours.append(src.nvml_calls - a0)
        theirs.append(lib.fake_nvml_calls() - b0)
    Clock.now += 1.0
costs.sort()
print(json.dumps({
    "ticks": len(costs),
    "calls_mean": statistics.fmean(ours), "calls_max": max(ours),
    "c_calls_mean": statistics.fmean(theirs),
    "median_us": statistics.median(costs) * 1e6,
    "mean_us": statistics.fmean(costs) * 1e6,
    "p99_us": costs[min(len(costs) - 1, int(0.99 * len(costs)))] * 1e6,
}))
src.close()
"""


def run_mode(fake: FakeNvml, mode: str, ticks: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(ticks)],
        cwd=ROOT,
        env=fake.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} failed: {out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        libdir = build(Path(tmp) / "lib")
        rows = []
        for n in (1, 8):
            fake = FakeNvml(libdir, Path(tmp) / f"script-{n}.txt")
            # every GPU runs 3 processes, one of them ours (process attribution does work)
            fake.write(
                [
                    gpu(i, procs={os.getpid(): GIB, 100000 + i: 2 * GIB, 200000 + i: GIB})
                    for i in range(n)
                ]
            )
            for mode in ("first", "steady", "worst", "1s"):
                r = run_mode(fake, mode, args.ticks)
                rows.append((n, mode, r))
    print(
        "| GPUs | mode | ticks | NVML calls/tick (mean / max) | C calls/tick | median | mean "
        "| p99 |"
    )
    print("|---:|---|---:|---|---:|---:|---:|---:|")
    for n, mode, r in rows:
        print(
            f"| {n} | {mode} | {r['ticks']} | {r['calls_mean']:.2f} / {r['calls_max']} | "
            f"{r['c_calls_mean']:.2f} | {r['median_us']:.0f} µs | {r['mean_us']:.0f} µs | "
            f"{r['p99_us']:.0f} µs |"
        )


if __name__ == "__main__":
    main()
