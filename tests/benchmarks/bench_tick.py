"""Row 1: what one sampler tick costs, per source and in total, and the sampler thread's CPU.

Per-source cost: a real ``make_sampler`` whose sources are wrapped in a stopwatch, its history
filled as after one hour, ticked ``cfg.tick_reps`` times 20 ms apart while a storage workload
runs (so disks and the process have something to report). Median and p99 of each source's
``collect`` and of the whole tick (sources + history + advice + subscribers).

Thread CPU: the same sampler started at 1 s for ``cfg.thread_cpu_s`` seconds; utime+stime of
the sampler thread from /proc/self/task/<tid>/stat, plus the CPU of the helper processes that
the mount guard starts (they are the sampler's cost too).

    python -m tests.benchmarks.run --only tick [--quick]
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Row,
    TreeCpu,
    fmt_ms,
    guarded,
    median,
    need_attr,
    need_module,
    percentile,
    skipped,
    storage_workload,
    thread_cpu_s,
)

GROUP = "1 tick"


class Stopwatch:
    """Wraps a Source: same name and behaviour, records how long each ``collect`` took."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = source.name
        self.times: list[float] = []
        self.cpu: list[float] = []  # CPU of the calling (sampler) thread only

    def collect(self, sample: Any) -> None:
        c0, t0 = time.thread_time(), time.perf_counter()
        try:
            self.source.collect(sample)
        finally:
            self.times.append(time.perf_counter() - t0)
            self.cpu.append(time.thread_time() - c0)

    def close(self) -> None:
        closer = getattr(self.source, "close", None)
        if callable(closer):
            closer()


@contextlib.contextmanager
def watched_dirs(n: int, separate_mounts: bool) -> Iterator[list[str]]:
    """``n`` directories; as root and with ``separate_mounts``, each on its own small tmpfs
    (the mount guard runs one helper per mount, so this is the expensive case)."""
    base = Path(tempfile.mkdtemp(prefix="twbench-paths-"))
    mounted: list[Path] = []
    try:
        dirs = []
        for i in range(n):
            d = base / f"p{i}"
            d.mkdir()
            if separate_mounts and os.geteuid() == 0:
                rc = subprocess.run(
                    ["mount", "-t", "tmpfs", "-o", "size=16m", f"twbench{i}", str(d)],
                    capture_output=True,
                ).returncode
                if rc == 0:
                    mounted.append(d)
            dirs.append(str(d))
        yield dirs
    finally:
        for d in mounted:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def prefill(sampler: Any) -> None:
    """Fill the history as after an hour at 1 s: copies of a real sample (same series keys)
    one second apart, ending now, so the detectors' windows see what they would see."""
    first = sampler.tick()
    now = time.time()
    cap = sampler.history.capacity
    for i in range(cap):
        sampler.history.append(dataclasses.replace(first, t=now - cap + i))


def _timed_ticks(
    make_sampler: Any, paths: list[str], reps: int, full_history: bool = True
) -> tuple[dict, tuple[list[float], list[float]]]:
    """Tick a real sampler ``reps`` times; return per-source times and whole-tick times."""
    sampler = make_sampler(paths, interval=1.0, gpu=False)
    try:
        if full_history:
            prefill(sampler)
        watches = [Stopwatch(s) for s in sampler.sources]
        sampler.sources = watches
        totals: list[float] = []
        cpu: list[float] = []
        warmup = 5
        for i in range(reps + warmup):
            c0, t0 = time.thread_time(), time.perf_counter()
            sampler.tick()
            dt = time.perf_counter() - t0
            if i >= warmup:
                totals.append(dt)
                cpu.append(time.thread_time() - c0)
            time.sleep(0.02)
        per_source = {w.name: (w.times[warmup:], w.cpu[warmup:]) for w in watches}
        return per_source, (totals, cpu)
    finally:
        sampler.close()


def _fmt(times: list[float], cpu: list[float] | None) -> str:
    text = f"{fmt_ms(median(times))} / {fmt_ms(percentile(times, 99))}"
    return text if cpu is None else f"{text} (thread CPU {fmt_ms(median(cpu))})"


def per_source(cfg: Config) -> list[Row]:
    make_sampler, why = need_attr("trainwatch_lab.monitor", "make_sampler")
    if make_sampler is None:
        return [skipped(GROUP, "tick cost per source (median / p99)", why or "")]
    rows: list[Row] = []
    with storage_workload() as work:
        configs = [
            ("N=1 path", 1, False, True),
            ("N=1 path, empty history", 1, False, False),
            ("N=8 paths, one mount", 8, False, True),
            ("N=8 paths on 8 mounts (7 tmpfs)", 8, True, True),
        ]
        for label, n, separate, full in configs:
            if separate and os.geteuid() != 0:
                rows.append(skipped(GROUP, f"tick, {label}", "needs root to mount tmpfs"))
                continue
            with watched_dirs(n - 1, separate) as dirs:
                paths = [str(work), *dirs]
                per, (totals, tick_cpu) = _timed_ticks(make_sampler, paths, cfg.tick_reps, full)
            for name, (times, src_cpu) in per.items():
                if (name == "paths" and "N=8" in label) or label == "N=1 path":
                    rows.append(
                        Row(
                            GROUP,
                            f"source `{name}` ({label}), median / p99 wall",
                            _fmt(times, src_cpu),
                            data={"median_s": median(times), "p99_s": percentile(times, 99)},
                        )
                    )
            sources_sum = [sum(v) for v in zip(*(t for t, _ in per.values()), strict=False)]
            rest = [t - s for t, s in zip(totals, sources_sum, strict=False)]
            sources_cpu = [sum(v) for v in zip(*(c for _, c in per.values()), strict=False)]
            rest_cpu = [t - s for t, s in zip(tick_cpu, sources_cpu, strict=False)]
            rows.append(
                Row(GROUP, f"history + advice + subscribers ({label})", _fmt(rest, rest_cpu))
            )
            rows.append(
                Row(
                    GROUP,
                    f"whole tick ({label}, no GPU), median / p99 wall",
                    _fmt(totals, tick_cpu),
                    data={"median_s": median(totals), "p99_s": percentile(totals, 99)},
                )
            )
    return rows


def gpu_rows(cfg: Config) -> list[Row]:
    """GpuSource over helper C's fake libnvidia-ml.so.1 (real pynvml bindings), 1 and 8 GPUs,
    at the 1 s cadence with the real defaults (static fields every 60 s, processes and PCIe
    every 5 s): bench_gpu.py does the measuring, in a fresh subprocess per mode."""
    bench_gpu, why = need_module("tests.benchmarks.bench_gpu")
    if bench_gpu is None:
        return [skipped(GROUP, "source `gpus`, fake NVML, 1 and 8 devices", f"helper C's {why}")]
    import tempfile as tf

    from tests.core.fake_nvml import GIB, FakeNvml, build, gpu

    rows = []
    with tf.TemporaryDirectory(prefix="twbench-gpu-") as tmp:
        libdir = build(Path(tmp) / "lib")
        for n in (1, 8):
            fake = FakeNvml(libdir, Path(tmp) / f"script-{n}.txt")
            fake.write([gpu(i, procs={os.getpid(): GIB, 100000 + i: 2 * GIB}) for i in range(n)])
            r = bench_gpu.run_mode(fake, "1s", 600)
            first = bench_gpu.run_mode(fake, "first", 1)
            rows.append(
                Row(
                    GROUP,
                    f"source `gpus`, fake NVML, {n} GPU{'s' if n > 1 else ''}, median / p99 wall",
                    f"{r['median_us'] / 1000:.3f} ms / {r['p99_us'] / 1000:.3f} ms",
                    note=(
                        f"{r['calls_mean']:.1f} NVML calls per tick on average (max "
                        f"{r['calls_max']}), 600 ticks at a simulated 1 s; first tick "
                        f"{first['median_us'] / 1000:.1f} ms; a real driver adds its own time"
                    ),
                    data={"1s": r, "first": first},
                )
            )
    return rows


def thread_cpu(cfg: Config) -> list[Row]:
    make_sampler, why = need_attr("trainwatch_lab.monitor", "make_sampler")
    if make_sampler is None:
        return [skipped(GROUP, "sampler thread CPU at 1 s", why or "")]
    import psutil

    me = psutil.Process()
    with storage_workload() as work:
        workload_pids = {c.pid for c in me.children(recursive=True)}
        sampler = make_sampler([str(work), os.getcwd()], interval=1.0)
        try:
            sampler.start()
            time.sleep(3.0)  # first probes and helper processes start here: not steady state
            tid = sampler._thread.native_id  # the Sampler's own thread
            # this process (sampler thread, probe threads; the main thread only sleeps) and
            # the helper processes the mount guard started, without the workload
            whole = TreeCpu(os.getpid(), exclude=workload_pids)
            t0, c0, ticks0 = time.monotonic(), thread_cpu_s(tid), sampler.ticks
            time.sleep(cfg.thread_cpu_s)
            t1, c1, ticks1 = time.monotonic(), thread_cpu_s(tid), sampler.ticks
            total = whole.poll()
            helpers = len(whole.pids()) - 1
        finally:
            sampler.close()
    wall = t1 - t0
    pct = 100 * (c1 - c0) / wall
    pct_all = 100 * total / wall
    note = f"{ticks1 - ticks0} ticks in {wall:.0f} s, 2 watched paths, probe on, workload running"
    return [
        Row(
            GROUP,
            f"sampler thread CPU at 1 s over {cfg.thread_cpu_s:.0f} s (% of one core)",
            f"{pct:.3f} %",
            note=note,
            data={"thread_pct": pct},
        ),
        Row(
            GROUP,
            "whole monitoring cost: all threads + mount-guard helper processes (% of one core)",
            f"{pct_all:.3f} %",
            note=f"{helpers} helper process(es)",
            data={"total_pct": pct_all},
        ),
    ]


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "tick cost per source", lambda: per_source(cfg)),
        *guarded(GROUP, "GPU tick (fake NVML)", lambda: gpu_rows(cfg)),
        *guarded(GROUP, "sampler thread CPU", lambda: thread_cpu(cfg)),
    ]
