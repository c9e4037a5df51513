"""Time lost to storage (issue 15): the accuracy/cost curve behind ``wait_rate_hz``, the CPU
cost at the chosen rate, and the accuracy table of item 4.

``python -m tests.benchmarks.bench_waits [--quick] [--cost]`` prints one markdown table (as
root: the accuracy rows mount sshfs behind a 25 ms link and a loop ext4; --cost: part 2
only). The loop being watched is tests/core/processes/waitloop.py in a child process, which records
every storage call it makes: the truth each reported fraction is compared with, per 1 s
tick and over the whole run.

1. Curve: one loop, a WaitSource per candidate rate watching it at the same time (the same
   truth for all), ticked every second. Two loops: fsync 30 % (every sleep is on storage:
   the split is trivially right) and fsync 20 % + sleep 30 % (half the sleep is on no file:
   the split is what sampling estimates). Per-tick error: RMS and p95 of reported - truth.
2. Cost: each rate alone for a while: CPU of the sampling thread (its schedstat) plus the
   per-tick ``collect`` on the sampler thread (thread_time), as % of one core; and the same
   in-process, the main thread spinning Python (a kernel watching itself: the GIL).
3. Accuracy: ``make_sampler(pid=child)`` as ``watch --pid`` builds it, at the default rate.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from tests.benchmarks.common import Config, Row
from tests.core.processes import waitloop
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import PathState, ProcessIO, Sample
from trainwatch_lab.core.processes.waits import WaitSource

RATES = (5, 10, 20, 50, 100, 200)
GROUP = "waits"


def _source(pid: int, rate: float) -> WaitSource:
    return WaitSource(pid=pid, defaults=replace(DEFAULTS, wait_rate_hz=rate))


def _sample(pid: int, path: str) -> Sample:
    return Sample(
        t=time.time(), process=ProcessIO(pid, 1, 0, 0, 0, 0), paths={path: PathState(path)}
    )


def _thread_cpu_s(source: WaitSource) -> float:
    thread = source.sampler._thread
    if thread is None or thread.native_id is None:
        return 0.0
    with open(f"/proc/self/task/{thread.native_id}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e9


def _tick_all(sources: list[WaitSource], pid: int, path: str, seconds: float) -> dict:
    """Tick every source once a second for ``seconds``; per source: [(t0, t1, fraction)],
    and its CPU (sampling thread + collect calls)."""
    spans: dict[int, list] = {id(s): [] for s in sources}
    collect_cpu = dict.fromkeys(spans, 0.0)
    last: dict[int, float] = {}
    for s in sources:  # start the threads, read the first schedstat
        s.collect(_sample(pid, path))
        last[id(s)] = time.time()
    time.sleep(1.0)
    start_cpu = {id(s): _thread_cpu_s(s) for s in sources}
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        for s in sources:
            sample = _sample(pid, path)
            c0 = time.thread_time()
            s.collect(sample)
            collect_cpu[id(s)] += time.thread_time() - c0
            now = time.time()
            if sample.process is not None and path in sample.process.waits:
                spans[id(s)].append((last[id(s)], now, sample.process.waits[path]))
            last[id(s)] = now
        time.sleep(max(0.0, 1.0 - (time.monotonic() - began) % 1.0))
    wall = time.monotonic() - began
    cost = {
        k: (_thread_cpu_s(s) - start_cpu[k] + collect_cpu[k]) / wall
        for s in sources
        if (k := id(s))
    }
    return {"spans": spans, "cost": cost}


def _errors(spans: list, calls: list) -> tuple[float, float, float]:
    """(RMS per-tick error, p95 |error|, error of the whole run) in fractions."""
    errs = [f - waitloop.truth(calls, a, b) for a, b, f in spans]
    if not errs:
        return math.nan, math.nan, math.nan
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    p95 = sorted(abs(e) for e in errs)[min(len(errs) - 1, int(0.95 * len(errs)))]
    a, b = spans[0][0], spans[-1][1]
    whole = sum((y - x) * f for x, y, f in spans) / (b - a) - waitloop.truth(calls, a, b)
    return rms, p95, whole


@contextlib.contextmanager
def _loop(mode: str, where: str, duty: float, seconds: float, idle: float = 0.0) -> Iterator:
    out = tempfile.mktemp(suffix=".json")
    child = waitloop.start(mode, where, duty, seconds, out, idle)
    box: dict = {"pid": child.pid}
    try:
        yield box
        child.wait(timeout=seconds + 60)
        box["calls"] = json.loads(Path(out).read_text())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        with contextlib.suppress(OSError):
            os.unlink(out)


def curve(cfg: Config, where: str, label_where: str) -> list[Row]:
    seconds = 12.0 if cfg.quick else 40.0
    rows = []
    for label, duty, idle in (("fsync 30 %", 0.3, 0.0), ("fsync 20 % + sleep 30 %", 0.2, 0.3)):
        with _loop("fsync", where, duty, seconds + 4, idle) as box:
            sources = [_source(box["pid"], rate) for rate in RATES]
            got = _tick_all(sources, box["pid"], where, seconds)
        for s in sources:
            s.close()
        for rate, s in zip(RATES, sources, strict=True):
            rms, p95, whole = _errors(got["spans"][id(s)], box["calls"])
            rows.append(
                Row(
                    GROUP,
                    f"curve: {label} on {label_where}, {rate} Hz: "
                    "per-tick error RMS / p95, whole run",
                    f"{rms * 100:.1f} / {p95 * 100:.1f} pp, {whole * 100:+.1f} pp",
                    note=f"{len(got['spans'][id(s)])} ticks",
                    data={"rate": rate, "rms": rms, "p95": p95, "whole": whole},
                )
            )
    return rows


def _cost_of(rate: float, mode: str, where: str, seconds: float) -> float:
    with _loop(mode, where, 0.3, seconds + 4) as box:
        source = _source(box["pid"], rate)
        got = _tick_all([source], box["pid"], where, seconds)
    source.close()
    return got["cost"][id(source)]


def cost(cfg: Config) -> list[Row]:
    """Each rate alone, in turns (the order rotated each round: a shared machine's load
    drifts); the median of the rounds."""
    seconds, rounds = (6.0, 1) if cfg.quick else (10.0, 3)
    got: dict[float, list[float]] = {r: [] for r in RATES}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as where:
        for n in range(rounds):
            for rate in RATES[n:] + RATES[:n]:
                got[rate].append(_cost_of(rate, "fsync", where, seconds))
        quiet = [_cost_of(DEFAULTS.wait_rate_hz, "cpu", where, seconds) for _ in range(rounds)]
    rows = []
    for rate in RATES:
        pct = statistics.median(got[rate]) * 100
        chosen = rate == DEFAULTS.wait_rate_hz
        rows.append(
            Row(
                GROUP,
                f"cost: {rate} Hz, another process sleeping 30 % in fsync (% of one core)",
                f"{pct:.3f} %",
                target="< 0.2 %" if chosen else "",
                status=("ok" if pct < 0.2 else "MISS") if chosen else "",
                note=("the default; " if chosen else "")
                + "rounds: "
                + ", ".join(f"{x * 100:.3f}" for x in got[rate]),
                data={"rate": rate, "cpu_fractions": got[rate]},
            )
        )
    rows.append(
        Row(
            GROUP,
            "cost: a CPU-only process (quiet: "
            f"{DEFAULTS.wait_quiet_rate_hz:g} look/s) (% of one core)",
            f"{statistics.median(quiet) * 100:.3f} %",
            target="< 0.2 %",
            status="ok" if statistics.median(quiet) < 0.002 else "MISS",
            note="rounds: " + ", ".join(f"{x * 100:.3f}" for x in quiet),
            data={"cpu_fractions": quiet},
        )
    )
    rows.append(_in_process(seconds, rounds))
    return rows


IN_PROCESS = r"""
import json, os, sys, threading, time
from trainwatch_lab.core.model import PathState, ProcessIO, Sample
from trainwatch_lab.core.processes.waits import WaitSource
seconds = float(sys.argv[1])
source = WaitSource()
def tick():
    cpu = 0.0
    for _ in range(int(seconds) + 1):
        c0 = time.thread_time()
        source.collect(Sample(t=0, process=ProcessIO(os.getpid(), 1, 0, 0, 0, 0),
                              paths={"/var/tmp": PathState("/var/tmp")}))
        cpu += time.thread_time() - c0
        if _ == 0:
            time.sleep(0.2)
            tid = source.sampler._thread.native_id
            t0 = int(open(f"/proc/self/task/{tid}/schedstat").read().split()[0])
            began = time.monotonic()
        time.sleep(1.0)
    t1 = int(open(f"/proc/self/task/{tid}/schedstat").read().split()[0])
    print(json.dumps(((t1 - t0) / 1e9 + cpu) / (time.monotonic() - began)), flush=True)
    os._exit(0)
threading.Thread(target=tick, name="trainwatch-sampler").start()
while True:  # the main thread: pure Python holding the GIL 70 % of the time, asleep 30 %
    began = time.perf_counter()
    while time.perf_counter() - began < 0.014:
        sum(range(100))
    time.sleep(0.006)
"""


def _in_process(seconds: float, rounds: int) -> Row:
    got = []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, str(seconds)],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
        got.append(json.loads(out.stdout))
    pct = statistics.median(got) * 100
    return Row(
        GROUP,
        f"cost: {DEFAULTS.wait_rate_hz:g} Hz in-process, main thread 70 % in pure Python "
        "(% of one core)",
        f"{pct:.3f} %",
        target="< 0.2 %",
        status="ok" if pct < 0.2 else "MISS",
        note="a kernel watching itself: the sampling thread takes the GIL at each look; "
        "rounds: " + ", ".join(f"{x * 100:.3f}" for x in got),
        data={"cpu_fractions": got},
    )


def run(cfg: Config) -> list[Row]:
    from tests.benchmarks import bench_waits_accuracy as acc

    rows = cost(cfg)
    if os.geteuid() != 0:
        with tempfile.TemporaryDirectory(dir="/var/tmp") as where:
            return [*rows, *curve(cfg, where, "local disk"), *acc.accuracy(cfg, None)]
    with tempfile.TemporaryDirectory() as base, acc.slow_share(base) as share:
        rows += curve(cfg, share, "sshfs behind 25 ms")
        return [*rows, *acc.accuracy(cfg, share)]


def main() -> int:
    from tests.benchmarks.run import table

    cfg = Config.make("--quick" in sys.argv)
    rows = cost(cfg) if "--cost" in sys.argv else run(cfg)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"bench_waits, {when}, load average at end {os.getloadavg()[0]:.1f}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
