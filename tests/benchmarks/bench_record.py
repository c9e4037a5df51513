"""What the recorded history costs (issue 27): bytes per stored value and per day for the
issue's reference box, the recorder's CPU on top of the sampler, and query times.

``python -m tests.benchmarks.bench_record [--quick]`` prints one markdown table; ``run(cfg)``
gives the same rows to ``tests.benchmarks.run``. Reports, asserts nothing.

The reference box: 4 disks, 8 GPUs and 4 watched paths sampled at 1 s (about 130 values a
second). The samples are synthetic, with what real sources send: NVML's whole percents,
milliwatts and degrees, PCIe throughput refreshed every 5 s, disk rates from counter
differences over 1 s, await and utilisation as noisy floats, free space going down in 4 KiB
blocks as checkpoints land. They go through the real Recorder (its subscriber call, a flush
every 10 simulated seconds, closed blocks every 300) into a real SQLite file; the day is
simulated on an injected clock, so a full run takes a minute or two, not a day.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

from tests.benchmarks.common import Config, Row, fmt_ms, percentile
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.history import flatten
from trainwatch_lab.core.model import Alert, DiskRates, GpuState, PathState, Sample
from trainwatch_lab.core.record import Event, Recorder, Store

GROUP = "record"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GiB = 1 << 30


class Box:
    """The reference box's sources, with state so neighbours are correlated as in life."""

    def __init__(self, seed: int = 27) -> None:
        self.rng = random.Random(seed)
        self.free = [800 * GiB, 1500 * GiB, 300 * GiB, 3000 * GiB]
        self.pcie = [(0.0, 0.0)] * 8
        self.temp = [60.0] * 8
        self.mem = [int(70 * GiB)] * 8

    def sample(self, t: float, n: int) -> Sample:
        rng = self.rng
        s = Sample(t=t)
        for i, name in enumerate(("nvme0n1", "nvme1n1", "sda", "sdb")):
            busy = i == 0
            r = float(rng.randint(400, 900) if busy else rng.choice((0, 0, 0, 1, 2)))
            w = float(rng.randint(5, 40) if busy else rng.choice((0, 0, 1)))
            s.disks[name] = DiskRates(
                name,
                r,
                w,
                r * rng.uniform(0.12, 0.13),
                w * rng.uniform(0.05, 0.5),
                rng.uniform(0.08, 0.3) if r else 0.0,
                rng.uniform(0.02, 1.5) if w else 0.0,
                rng.uniform(0.1, 0.6) if busy else 0.0,
                rng.uniform(30, 60) if busy else (rng.uniform(0, 1) if r else 0.0),
            )
        if n % 600 == 0:  # a 2 GiB checkpoint every 10 min on the first path
            self.free[0] -= 2 * GiB
        self.free[1] -= 4096 * rng.randint(0, 3)  # logs
        for i, path in enumerate(("/data", "/ckpt", "/home/u/runs", "/scratch")):
            free = self.free[i]
            s.paths[path] = PathState(
                path,
                exists=True,
                total_bytes=4000 * GiB,
                free_bytes=free,
                avail_bytes=free,
                inodes_free=10**8 - n // 100,
            )
        for g in range(8):
            if n % 5 == 0:
                self.pcie[g] = (rng.randint(2000, 9000) * 1024.0, rng.randint(100, 900) * 1024.0)
            self.temp[g] = min(85, max(40, self.temp[g] + rng.choice((-1, 0, 0, 0, 1))))
            if rng.random() < 0.01:
                self.mem[g] += rng.choice((-1, 1)) * 2 * 1024**2
            s.gpus.append(
                GpuState(
                    g,
                    g,
                    f"GPU-{g}",
                    "H100",
                    util_pct=float(rng.randint(85, 100)),
                    mem_util_pct=float(rng.randint(30, 60)),
                    mem_used_bytes=self.mem[g],
                    mem_total_bytes=80 * GiB,
                    power_w=rng.randint(550_000, 700_000) / 1000,
                    temp_c=self.temp[g],
                    pcie_rx_bps=self.pcie[g][0],
                    pcie_tx_bps=self.pcie[g][1],
                )
            )
        return s


def _simulate(
    path: str, seconds: int, fill_s: int = 0, early: bool = False
) -> tuple[int, float, list[float], list[float]]:
    """Record ``seconds`` of the box at 1 s; (values, subscriber CPU, per-tick CPU list,
    per-flush CPU list). ``fill_s``: its paths' filesystem fills from 100 GiB free to none in
    that long, then holds still; ``early``: flush when the recorder asks (its thread would)."""
    box = Box()
    t0 = 1_800_000_000.0
    clock = [t0]
    defaults = replace(DEFAULTS, record_min_free_bytes=0, record_maintain_every_s=1e9)
    rec = Recorder(path, every=1.0, defaults=defaults, clock=lambda: clock[0])
    values = 0
    call_cpu: list[float] = []
    flush_cpu: list[float] = []
    for n in range(seconds):
        clock[0] = t0 + n
        sample = box.sample(clock[0], n)
        if fill_s:
            for p in sample.paths.values():
                p.avail_bytes = 100 * 2**30 * max(0.0, 1 - n / fill_s)
        if n % 3600 == 1800:  # a warning raised and cleared each hour: events too
            sample.warnings = [Alert("disk-saturated", "warning", "nvme0n1", "busy", "spread")]
        values += sum(1 for _ in flatten(sample))
        c = time.thread_time()
        rec(sample)
        call_cpu.append(time.thread_time() - c)
        if n % 10 == 9 or (early and rec.flush_wanted):
            c = time.thread_time()
            rec.flush()
            flush_cpu.append(time.thread_time() - c)
    rec.close()
    return values, sum(call_cpu), call_cpu, flush_cpu


def run(cfg: Config) -> list[Row]:
    seconds = 2 * 3600 if cfg.quick else 86_400
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="twbench-record-") as d:
        path = os.path.join(d, "history.sqlite")
        values, _, calls, flushes = _simulate(path, seconds)
        store = Store(path)
        wal = store.wal_bytes()  # what a reader of the disk sees beside the file meanwhile
        store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        used = store.used_bytes()
        file_size = os.path.getsize(path)
        blob = store.con.execute("SELECT sum(length(data)) FROM blocks").fetchone()[0] or 0
        per_value = used / values
        per_day = used * 86_400 / seconds
        rows.append(
            Row(
                GROUP,
                "bytes per stored value (file pages in use / values)",
                f"{per_value:.3f} B",
                "<= 1 B",
                "ok" if per_value <= 1 else "MISS",
                f"{values:,} values in {seconds / 3600:g} h; blocks alone "
                f"{blob / values:.3f} B/value; file {file_size / 2**20:.1f} MiB, and its WAL "
                f"{wal / 2**20:.1f} MiB until a checkpoint",
                data={"values": values, "used": used, "blob": blob, "wal": wal},
            )
        )
        rows.append(
            Row(
                GROUP,
                "bytes per day, reference box at 1 s",
                f"{per_day / 1e6:.1f} MB",
                "<= 10 MB",
                "ok" if per_day <= 10e6 else "MISS",
                "4 disks, 8 GPUs, 4 paths",
                data={"per_day": per_day},
            )
        )
        per_s = (sum(calls) + sum(flushes)) / seconds
        rows.append(
            Row(
                GROUP,
                "recorder CPU on top of the sampler, at 1 s",
                f"{per_s * 100:.3f} % of a core",
                "<= 0.05 %",
                "ok" if per_s <= 0.0005 else "MISS",
                f"subscriber {fmt_ms(statistics.median(calls))} median per tick, flush "
                f"{fmt_ms(statistics.median(flushes))} median per 10 s "
                f"(p99 {fmt_ms(percentile(flushes, 99))}: block closes)",
                data={"per_s": per_s},
            )
        )
        now = 1_800_000_000.0 + seconds
        reads = []
        for _ in range(5):
            fresh = Store(path, readonly=True)
            c = time.perf_counter()
            ts, _ = fresh.read(["gpu:0:util_pct"], now - 86_400, now)["gpu:0:util_pct"]
            reads.append(time.perf_counter() - c)
            fresh.close()
        rows.append(
            Row(
                GROUP,
                f"query: one chart over {min(seconds, 86400) / 3600:g} h",
                f"{fmt_ms(statistics.median(reads))} median",
                "",
                "",
                f"{len(ts):,} points, a fresh connection each time",
            )
        )
        week = 7 * 86_400
        rng = random.Random(1)
        store.add_events(
            [
                Event(
                    now - week + rng.uniform(0, week),
                    "warning-raised",
                    "/data",
                    "disk-filling: /data is filling",
                    {"code": "disk-filling"},
                )
                for _ in range(5000)
            ]
        )
        c = time.perf_counter()
        got = store.events(now - week, now)
        took = time.perf_counter() - c
        rows.append(
            Row(
                GROUP,
                "query: a week of events (5,000)",
                f"{fmt_ms(took)}",
                "",
                "",
                f"{len(got):,} events",
            )
        )
        store.close()
    rows.append(_fill_row(seconds))
    rows += _week_rows(12 if cfg.quick else 120)
    return rows


def _week(path: str, series: int, now: float) -> None:
    """A week of ``series`` series as maintain() leaves it: the last day at 1 s (tier 0,
    blocks of 600), six days of minute means before it (tier 1)."""
    rng = random.Random(7)
    store = Store(path, role="bench")
    store.register()
    per = DEFAULTS.record_block_points
    for n in range(series):
        key, base = f"disk:d{n}:util", rng.uniform(0, 100)
        ts = [now - 7 * 86_400 + 60 * i + 30 for i in range(6 * 1440)]
        vs = [base + 10 * math.sin(i / 50) for i in range(len(ts))]
        for i in range(0, len(ts), per):
            store.close_blocks({key: (ts[i : i + per], vs[i : i + per])}, tier=1)
        ts = [now - 86_400 + i for i in range(86_400)]
        vs = [round(base + 10 * math.sin(i / 500) + rng.random(), 1) for i in range(86_400)]
        for i in range(0, len(ts), per):
            store.close_blocks({key: (ts[i : i + per], vs[i : i + per])})
    store.close()


def _peak_kib(argv: list[str]) -> int:
    """The peak resident memory of the command ``argv`` (its stdout thrown away)."""
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, env={**os.environ, "PYTHONPATH": ROOT})
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return int(usage.ru_maxrss)


def _week_rows(series: int) -> list[Row]:
    """``history --since 7d`` (the table: per-block aggregates, Store.summary) against
    reading every point, and the peak memory of ``--format csv`` and ``json`` (streamed)."""
    now = float(round(time.time()))
    since = now - 7 * 86_400
    with tempfile.TemporaryDirectory(prefix="twbench-record-week-") as d:
        path = os.path.join(d, "history.sqlite")
        _week(path, series, now)
        store = Store(path, readonly=True)
        keys = store.keys()
        c = time.process_time()
        for key in keys:
            store.summary(key, since, now)
        summed, summed_cpu = store.decoded, time.process_time() - c
        store.decoded = 0
        c = time.process_time()
        for key in keys:
            store.read([key], since, now)
        every, every_cpu = store.decoded, time.process_time() - c
        store.close()
        cli = [sys.executable, "-m", "trainwatch_lab", "history", "--store", path]
        window = ["--since", str(since), "--until", str(now)]
        peaks = {f: _peak_kib([*cli, *window, "--format", f]) for f in ("csv", "json")}
    return [
        Row(
            GROUP,
            f"history --since 7d, table of {series} series",
            f"{summed_cpu:.2f} s CPU",
            "",
            "",
            f"decodes {summed:,} points (whole blocks from their aggregates); reading every "
            f"point decodes {every:,} in {every_cpu:.2f} s CPU",
            data={"decoded": summed, "cpu": summed_cpu, "every": every, "every_cpu": every_cpu},
        ),
        Row(
            GROUP,
            f"history --since 7d --format csv / json, {series} series",
            f"{peaks['csv'] / 1024:.0f} / {peaks['json'] / 1024:.0f} MB peak",
            "",
            "",
            "streamed: csv a slice of time at a time, json a series at a time",
            data=peaks,
        ),
    ]


def _fill_row(seconds: int) -> Row:
    """A disk filled in the first quarter of the run, then still: flushes, and the file at
    the end with the recorder's early flushes (record_hurry_drop_share) against the 10 s
    timer alone. Their recent rows are folded into blocks like any: the extra pages are a
    high-water mark that later blocks reuse (gone after ~3 h still in a 4 h run), bounded
    by the number of early flushes (~100 ln(free / last reading), however big the disk)."""
    out = {}
    for early in (False, True):
        with tempfile.TemporaryDirectory(prefix="twbench-record-fill-") as d:
            path = os.path.join(d, "history.sqlite")
            _, _, _, flushes = _simulate(path, seconds, fill_s=seconds // 4, early=early)
            out[early] = (len(flushes), os.path.getsize(path))
    (timer, size), (both, size_early) = out[False], out[True]
    return Row(
        GROUP,
        f"a fill ({seconds / 14400:g} h to full, {seconds / 4800:g} h still): flushes, file",
        f"{both - timer} early flushes",
        "<= 1 MiB more file",
        "ok" if size_early - size <= 2**20 else "MISS",
        f"{timer} timer flushes; file {size_early / 2**20:.2f} MiB with them, "
        f"{size / 2**20:.2f} MiB without",
        data={"timer": timer, "early": both - timer, "size": size, "size_early": size_early},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows = run(Config.make(args.quick))
    print("| measurement | value | target | verdict | notes |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.metric} | {r.value} | {r.target} | {r.status} | {r.note} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
