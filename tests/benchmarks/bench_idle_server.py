"""What an idle Jupyter server with the recording on costs (issue 27, item 1).

``python -m tests.benchmarks.bench_idle_server [--quick]`` prints one markdown table;
``run(cfg)`` gives the rows to ``tests.benchmarks.run``. Reports, asserts nothing.

A real Jupyter server with the trainwatch_lab extension and ``c.TrainWatch.record`` on (the
default), no kernel, no client, nothing training: its process tree's CPU over a minute,
with ``record_idle_stop`` off (before: the sampler runs from the start, always) and on
(after: the sampler stops once nothing was worth recording for ``record_idle_after_s``,
here 5 s so the warm-up is short; the idle look runs every 10 s as by default). Then the
idle look itself: one procfs pass of core.training's Scanner over this machine's processes
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
from trainwatch_lab.core.training import Scanner

GROUP = "idle-server"
IDLE_AFTER_S = 5.0
WARM_S = IDLE_AFTER_S + 15.0  # the sampler ran, went idle and its grace (10 s) passed


def server_cpu(idle_stop: bool, seconds: float) -> float:
    """% of one core used by an idle server's process tree over ``seconds``."""
    with tempfile.TemporaryDirectory(prefix="twbench-idle-") as state:
        args = [
            "--TrainWatch.record=True",
            f"--TrainWatch.record_path={state}/history.sqlite",
            f"--TrainWatch.record_idle_stop={idle_stop}",
            f"--TrainWatch.record_idle_after_s={IDLE_AFTER_S}",
        ]
        with jupyter_server(extensions={"trainwatch_lab": True}, extra_args=args) as server:
            time.sleep(WARM_S)
            cpu = TreeCpu(server.proc.pid)
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                time.sleep(1.0)
                cpu.poll()
            return 100.0 * cpu.poll() / (time.monotonic() - t0)


def look_cpu(passes: int = 20) -> tuple[float, int]:
    """Median thread CPU (s) of one Scanner pass, and how many processes it went over."""
    scanner = Scanner()
    costs = [scanner.scan().cpu_s for _ in range(passes)]
    return statistics.median(costs), sum(1 for n in os.listdir("/proc") if n.isdigit())


def run(cfg: Config) -> list[Row]:
    seconds = 20.0 if cfg.quick else 60.0
    before = server_cpu(False, seconds)
    after = server_cpu(True, seconds)
    look, procs = look_cpu()
    every = DEFAULTS.record_idle_check_s
    note = f"{seconds:.0f} s, process tree CPU, record on, nothing training"
    return [
        Row(GROUP, "idle server CPU, sampler always on (before)", f"{before:.3f} %", note=note),
        Row(GROUP, "idle server CPU, idle stop (after)", f"{after:.3f} %", note=note),
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
