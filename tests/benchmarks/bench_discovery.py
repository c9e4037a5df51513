"""What finding training processes costs (issue 14): one discovery pass with 500 processes on
the machine, and the sampler's CPU at 1 s with and without discovery.

The machine is filled up to ``TARGET`` processes: ``sleep`` processes (3 descriptors each),
``WIDE`` Python processes with 200 open files each (a browser, a database) and ``RUNS`` "training
runs" writing an event file (each becomes a row with its I/O reader, its main-thread look and
two watched directories). Then:

- pass CPU: ``core.processes.discovery.scan`` run ``PASSES`` times, thread CPU of each pass
(median, p99),
  as root (every process looked at) and as an ordinary user (``setpriv``: only its own); and
  a ``Scanner`` as the source runs it (links of new descriptors, every link each 5th pass);
- sampler CPU: ``make_sampler([workdir], interval=1.0)`` for ``cfg.thread_cpu_s`` seconds with
  ``processes=False`` then ``processes=True``: CPU of this process (every thread: the sampler,
  the discovery thread, the probe threads) per second, and of the discovery thread alone.

    python -m tests.benchmarks.bench_discovery [--quick]      (as root)

Not in run.py's table yet (that file is shared); ``--json FILE`` keeps the raw numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .common import REPO, Config, Row, fmt_ms, guarded, median, percentile, skipped

GROUP = "discovery"
TARGET = 500  # processes on the machine during the measurement
WIDE = 20  # of them with many descriptors
WIDE_FDS = 200
RUNS = 4  # of them training runs (event files open for writing)
PASSES = 50
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by an ordinary user
AS_NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")

WIDE_CODE = (
    "import sys, time\nfiles = [open('/dev/null') for _ in range(int(sys.argv[1]))]\n"
    "print('ready', flush=True)\ntime.sleep(3600)\n"
)
RUN_CODE = (
    "import os, sys, time\n"
    "f = open(os.path.join(sys.argv[1], 'events.out.tfevents.1700000000.bench'), 'ab')\n"
    "print('ready', flush=True)\n"
    "while True:\n    f.write(b'x' * 256); f.flush(); time.sleep(0.1)\n"
)
USER_SCAN = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from trainwatch_lab.core.processes.discovery import scan
cpu, looked = [], 0
for _ in range(int(sys.argv[2])):
    r = scan()
    cpu.append(r.cpu_s)
    looked = len(r.looked_at)
print(json.dumps({"cpu": cpu, "looked_at": looked, "other_users": r.other_users}))
"""


def _count() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _ready(cmd: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@contextlib.contextmanager
def crowd(workdir: Path) -> Iterator[int]:
    """Fill the machine up to TARGET processes; yields how many run during the block."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for i in range(RUNS):
            logdir = workdir / f"run{i}"
            logdir.mkdir()
            procs.append(_ready([sys.executable, "-c", RUN_CODE, str(logdir)]))
        for _ in range(WIDE):
            procs.append(_ready([sys.executable, "-c", WIDE_CODE, str(WIDE_FDS)]))
        sleep = shutil.which("sleep") or "/bin/sleep"
        for _ in range(max(0, TARGET - _count())):
            procs.append(subprocess.Popen([sleep, "3600"], start_new_session=True))
        time.sleep(0.5)
        yield _count()
    finally:
        for proc in procs:  # ours, by pid
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in procs:
            proc.wait()


def _pass_rows(n: int) -> list[Row]:
    from trainwatch_lab.core.processes.discovery import Scanner, scan

    full = [scan().cpu_s for _ in range(PASSES)]
    scanner = Scanner()  # as the source runs it: new descriptors' links, all every 5th pass
    mixed = [scanner.scan().cpu_s for _ in range(PASSES)]
    found = len(scan().found)
    rows = [
        Row(
            GROUP,
            f"one full pass as root, {n} processes (all looked at)",
            f"median {fmt_ms(median(full))}, p99 {fmt_ms(percentile(full, 99))} CPU",
            note=f"{found} training processes found; {PASSES} passes",
            data={"cpu_s": full, "processes": n, "found": found},
        ),
        Row(
            GROUP,
            "passes as the source runs them (links of new descriptors, all every 5th)",
            f"mean {fmt_ms(sum(mixed) / len(mixed))}, p99 {fmt_ms(percentile(mixed, 99))} CPU",
            data={"cpu_s": mixed},
        ),
    ]
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.access(SYSTEM_PYTHON, os.X_OK):
        rows.append(skipped(GROUP, "one pass as an ordinary user", "needs root and setpriv"))
        return rows
    out = subprocess.run(
        [setpriv, *AS_NOBODY, SYSTEM_PYTHON, "-c", USER_SCAN, str(REPO), str(PASSES)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    if out.returncode != 0:
        rows.append(skipped(GROUP, "one pass as an ordinary user", out.stderr.strip()[-200:]))
        return rows
    user = json.loads(out.stdout)
    rows.append(
        Row(
            GROUP,
            f"one pass as an ordinary user, {n} processes",
            f"median {fmt_ms(median(user['cpu']))}, p99 {fmt_ms(percentile(user['cpu'], 99))} CPU",
            note=f"{user['other_users']} other users' processes: only /proc/PID's owner read",
            data=user,
        )
    )
    return rows


def _sampler_cpu(workdir: Path, seconds: float, processes: bool) -> tuple[float, float]:
    """CPU per wall second of this process with a sampler at 1 s, and of discovery alone."""
    from trainwatch_lab.monitor import make_sampler

    sampler = make_sampler([str(workdir)], interval=1.0, gpu=False, processes=processes)
    sampler.start()
    time.sleep(3.0)  # past the first probe and the first pass
    c0, t0 = time.process_time(), time.monotonic()
    source = sampler.find_source("training")
    d0 = getattr(source, "cpu_s", 0.0)
    time.sleep(seconds)
    cpu, wall = time.process_time() - c0, time.monotonic() - t0
    discovery = getattr(source, "cpu_s", 0.0) - d0
    sampler.close()
    return cpu / wall, discovery / wall


def _sampler_rows(workdir: Path, seconds: float) -> list[Row]:
    off, _ = _sampler_cpu(workdir, seconds, False)
    on, discovery = _sampler_cpu(workdir, seconds, True)
    return [
        Row(
            GROUP,
            "sampler at 1 s, this process's CPU: without / with discovery",
            f"{off * 100:.2f} % / {on * 100:.2f} % of a core (+{(on - off) * 100:.2f} points)",
            note=(
                f"discovery thread alone {discovery * 100:.2f} %; with discovery the sampler "
                f"also reads {RUNS} runs' I/O and main threads and watches their directories"
            ),
            data={"off": off, "on": on, "discovery": discovery, "seconds": seconds},
        )
    ]


def run(cfg: Config) -> list[Row]:
    if os.geteuid() != 0:
        return [skipped(GROUP, "discovery", "run as root (the pass looks at every process)")]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="twbench-discovery-") as tmp:
        workdir = Path(tmp)
        with crowd(workdir) as n:
            rows += guarded(GROUP, "one pass", lambda: _pass_rows(n))
            rows += guarded(GROUP, "sampler", lambda: _sampler_rows(workdir, cfg.thread_cpu_s))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 s per sampler run, not 60 s")
    parser.add_argument("--json", type=Path, help="also write the rows with raw numbers here")
    args = parser.parse_args()
    rows = run(Config.make(args.quick))
    for r in rows:
        print(f"| {r.group} | {r.metric} | {r.value} | {r.note} |")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    assert threading.current_thread() is threading.main_thread()
    sys.exit(main())
