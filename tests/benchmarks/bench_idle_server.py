"""What an idle Jupyter server with the recording on costs (issue 27, item 1).

``python -m tests.benchmarks.bench_idle_server [--quick]`` prints one markdown table;
``run(cfg)`` gives the rows to ``tests.benchmarks.run``. Reports, asserts nothing.

A real Jupyter server with the trainwatch_lab extension and ``c.TrainWatch.record`` on (the
default), no kernel, no client, nothing training: its process tree's CPU over a minute,
with ``record_idle_stop`` off (before: the sampler runs from the start, always) and on
(after: the sampler stops once nothing was worth recording for ``record_idle_after_s``,
here 5 s so the warm-up is short; the idle look runs every 10 s as by default), both with
the process discovery off, so that a training process elsewhere on a shared machine cannot
wake it while it is measured; and once as shipped (discovery on), saying what woke it. Then the
idle look itself: one procfs pass of core.processes.discovery's Scanner over this machine's
processes
(what the look costs every ``record_idle_check_s``), median thread CPU of 20 passes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from tests.benchmarks.common import Config, Row, TreeCpu, fmt_ms, jupyter_server
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.processes.discovery import Scanner
from trainwatch_lab.core.record import Store

GROUP = "idle-server"
IDLE_AFTER_S = 5.0
WARM_S = IDLE_AFTER_S + 15.0  # the sampler ran, went idle and its grace (10 s) passed


def server_cpu(
    idle_stop: bool | None, seconds: float, processes: bool = False
) -> tuple[float, str]:
    """% of one core used by an idle server's process tree over ``seconds``, and what the
    recording's events say it did (None: a bare server, no trainwatch_lab). ``processes``:
    the discovery on (the default of c.TrainWatch.watch_processes); off, no other user's
    training process on a shared machine can wake the sampler while it is measured."""
    with tempfile.TemporaryDirectory(prefix="twbench-idle-") as state:
        store = f"{state}/history.sqlite"
        args = [
            "--TrainWatch.record=True",
            f"--TrainWatch.record_path={store}",
            f"--TrainWatch.record_idle_stop={idle_stop}",
            f"--TrainWatch.record_idle_after_s={IDLE_AFTER_S}",
            f"--TrainWatch.watch_processes={processes}",
        ]
        on = idle_stop is not None
        with jupyter_server(
            extensions={"trainwatch_lab": on}, extra_args=args if on else ()
        ) as server:
            time.sleep(WARM_S)
            cpu = TreeCpu(server.proc.pid)
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                time.sleep(1.0)
                cpu.poll()
            used = 100.0 * cpu.poll() / (time.monotonic() - t0)
            time.sleep(DEFAULTS.record_flush_s + 1)  # the events reach the file
        return used, _what_it_did(store) if on else "no trainwatch_lab"


def _what_it_did(path: str) -> str:
    """The recording's idle/resumed events, in short."""
    if not os.path.exists(path):
        return "no history written"
    store = Store(path, readonly=True)
    try:
        events = [e for e in store.events(0, 2e9) if e.kind.startswith("recording-")]
    finally:
        store.close()
    return "; ".join(e.text[:80] for e in events) or "no idle/resumed event (sampler ran on)"


def look_cpu(passes: int = 20) -> tuple[float, int]:
    """Median thread CPU (s) of one Scanner pass, and how many processes it went over."""
    scanner = Scanner()
    costs = [scanner.scan().cpu_s for _ in range(passes)]
    return statistics.median(costs), sum(1 for n in os.listdir("/proc") if n.isdigit())


def run(cfg: Config) -> list[Row]:
    seconds = 20.0 if cfg.quick else 60.0
    bare, _ = server_cpu(None, seconds)
    before, did_before = server_cpu(False, seconds)
    after, did_after = server_cpu(True, seconds)
    shipped, did_shipped = server_cpu(True, seconds, processes=True)
    look, procs = look_cpu()
    every = DEFAULTS.record_idle_check_s
    note = f"{seconds:.0f} s, process tree CPU"
    return [
        Row(GROUP, "idle bare Jupyter server CPU (reference)", f"{bare:.3f} %", note=note),
        Row(
            GROUP,
            "idle server CPU, record on, sampler always on (before)",
            f"{before:.3f} %",
            note=f"{note}; {did_before}",
        ),
        Row(
            GROUP,
            "idle server CPU, record on, idle stop (after)",
            f"{after:.3f} %",
            note=f"{note}; {did_after}",
        ),
        Row(
            GROUP,
            "idle server CPU, record on, idle stop, discovery on (as shipped)",
            f"{shipped:.3f} %",
            note=f"{note}; other users' training processes wake it: {did_shipped}",
        ),
        Row(
            GROUP,
            "idle look: one Scanner pass",
            fmt_ms(look),
            note=f"{procs} processes (root: all users); every {every:.0f} s = "
            f"{100 * look / every:.3f} % of a core",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows = run(Config.make(args.quick))
    print("| metric | value | note |\n|---|---|---|")
    for row in rows:
        print(f"| {row.metric} | {row.value} | {row.note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
