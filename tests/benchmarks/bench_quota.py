"""What reading quotas costs per tick (issue 17, item 1).

``python -m tests.benchmarks.bench_quota [--quick]`` prints one markdown table; ``run(cfg)``
gives the same rows to ``tests.benchmarks.run``. Reports, asserts nothing. CPU time of the
calling thread (``time.thread_time``), median and p99 over many calls, for:

1. ``read_quotas`` on a local directory (ext4 or whatever holds the temporary directory):
   open, fstat, fstatfs, the project-id ioctl and one ``quotactl_fd`` per kind. This is
   what a watched path on a quota-capable filesystem costs each tick.
2. The same directory taken for Lustre, answered by a tiny ``/bin/sh`` ``lfs`` that prints
   a row (a C binary's fork/exec is about a shell's): the per-tick read, which only returns
   the last answer, and one refresh (three tool runs: user, group, project), measured as the
   CPU of the run's thread plus its children; the refresh happens every
   ``quota_tool_every_s``, so its cost per tick is that divided by the ticks in between.
"""

from __future__ import annotations

import argparse
import os
import resource
import stat
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tests.benchmarks.common import Config, Row, fmt_ms, percentile
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.storage import quota_tools
from trainwatch_lab.core.storage.fstypes import fs_magic
from trainwatch_lab.core.storage.quota import read_quotas

GROUP = "quota"
FAKE_LFS = """#!/bin/sh
for last; do :; done
printf '%15s 48234496       0 52428800       -    1021       0       0       -\\n' "$last"
"""


def _cpu_per_call(fn, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return times


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _row(metric: str, times: list[float], note: str) -> Row:
    med, p99 = statistics.median(times), percentile(times, 99)
    return Row(
        GROUP,
        metric,
        f"{fmt_ms(med)} median, {fmt_ms(p99)} p99",
        note=note,
        data={"median_s": med, "p99_s": p99, "n": len(times)},
    )


def _lustre_rows(directory: str, reps: int) -> list[Row]:
    bin_dir = Path(directory) / "bin"
    bin_dir.mkdir()
    lfs = bin_dir / "lfs"
    lfs.write_text(FAKE_LFS)
    lfs.chmod(lfs.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    fd = os.open(directory, os.O_RDONLY)
    magic = fs_magic(fd)
    os.close(fd)
    quota_tools.TOOL_BY_MAGIC[magic or 0] = "lfs"
    every = DEFAULTS.quota_tool_every_s
    quota_tools._shared = quota_tools.ToolQuotas(replace(DEFAULTS, quota_tool_every_s=3600.0))
    first = read_quotas(directory)  # the first read waits for the first run
    assert first["quotas"], first
    reads = _cpu_per_call(lambda: read_quotas(directory), reps)
    refresh = []
    for _ in range(max(5, reps // 100)):
        tools = quota_tools.ToolQuotas()
        m = quota_tools._Mount()
        t0, c0 = time.thread_time(), _children_cpu()
        tools._run(m, "lfs", directory, {"user": 0, "group": 0, "project": 0})
        refresh.append(time.thread_time() - t0 + _children_cpu() - c0)
    per_tick = statistics.median(refresh) / every
    return [
        _row(
            "read_quotas, Lustre (cached answer), per tick",
            reads,
            "open, fstat, fstatfs, the mount table; no tool run",
        ),
        _row(
            "one refresh: 3 runs of a /bin/sh lfs",
            refresh,
            f"every {every:g} s: {fmt_ms(per_tick)} per 1 s tick",
        ),
    ]


def run(cfg: Config) -> list[Row]:
    reps = 2000 if cfg.quick else 20000
    with tempfile.TemporaryDirectory(prefix="twbench-quota-") as directory:
        local = _cpu_per_call(lambda: read_quotas(directory), reps)
        answer = read_quotas(directory)
        rows = [
            _row(
                "read_quotas, local directory, per tick",
                local,
                f"{reps} calls; here: {answer['none'] or 'a quota'}",
            )
        ]
        return rows + _lustre_rows(directory, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows = run(Config.make(args.quick))
    print("| measurement | CPU per call | notes |\n|---|---|---|")
    for r in rows:
        print(f"| {r.metric} | {r.value} | {r.note} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
