"""What deciding where a save goes costs (issue 38): ``save_checkpoint`` of 64 MiB on a local
disk, the decision against the whole save.

``python -m tests.benchmarks.bench_save_decision [--quick] [--dir D]`` prints one markdown
table; ``run(cfg)`` gives the same rows to ``tests.benchmarks.run``. Reports, asserts nothing.
The decision is everything before the caller's ``save`` runs: the plan in the guard's lane
(statvfs, the quotas, the listing of the series, the manifest) and the choice (the size of
the last save against the space ours, room made, fallback, wait). Each is timed inside a
real save (wall clock, ``time.perf_counter``) with ``keep=3``, ``fallback=`` and
``on_full="wait"`` set, as a user who turned everything on would run it; the save itself
writes 64 MiB, fsyncs and renames.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tests.benchmarks.common import Config, Row, fmt_ms, percentile
from trainwatch_lab.fix.checkpoint import save as checkpoint
from trainwatch_lab.fix.checkpoint.save import save_checkpoint

GROUP = "save-decision"
MIB = 1024 * 1024
SAVE_MIB = 64
GOAL = 0.01  # the decision costs under 1 % of the save


def _timed(fn: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[-1] += time.perf_counter() - t0

    return wrapper


def measure(directory: str, saves: int) -> tuple[list[float], list[float]]:
    """Per save: the decision's seconds and the whole save's seconds."""
    state = os.urandom(SAVE_MIB * MIB)

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(state)

    decision: list[float] = []
    whole: list[float] = []
    plan, room = checkpoint._plan, checkpoint._room
    checkpoint._plan = _timed(plan, decision)  # type: ignore[assignment]
    checkpoint._room = _timed(room, decision)  # type: ignore[assignment]
    try:
        for i in range(saves):
            decision.append(0.0)
            t0 = time.perf_counter()
            save_checkpoint(
                write,
                os.path.join(directory, f"step-{i:05d}.pt"),
                keep=3,
                fallback=os.path.join(directory, "fallback"),
                on_full="wait",
            )
            whole.append(time.perf_counter() - t0)
    finally:
        checkpoint._plan, checkpoint._room = plan, room  # type: ignore[assignment]
    return decision[1:], whole[1:]  # the first save has no last one to go by: left out


def run(cfg: Config, directory: str | None = None) -> list[Row]:
    saves = 6 if cfg.quick else 31
    with tempfile.TemporaryDirectory(prefix="twbench-save-", dir=directory or "/var/tmp") as d:
        decision, whole = measure(d, saves)
    shares = [a / b for a, b in zip(decision, whole, strict=True)]
    share = statistics.median(shares)
    return [
        Row(
            GROUP,
            f"decision per save of {SAVE_MIB} MiB on local disk (plan + choice / whole save)",
            f"{share * 100:.2f} %",
            "< 1 %",
            "ok" if share < GOAL else "MISS",
            f"median of {len(shares)} saves: decision {fmt_ms(statistics.median(decision))} "
            f"(p90 {fmt_ms(percentile(decision, 90))}), save "
            f"{fmt_ms(statistics.median(whole))}; p90 share "
            f"{percentile(shares, 90) * 100:.2f} %; keep=3, fallback= and on_full='wait' set",
            data={"decision_s": decision, "save_s": whole},
        )
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", help="a directory on the disk to measure (default /var/tmp)")
    args = ap.parse_args()
    rows = run(Config.make(args.quick), args.dir)
    print("| measurement | value | target | verdict | notes |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.metric} | {r.value} | {r.target} | {r.status} | {r.note} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
