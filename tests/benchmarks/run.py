"""The one command: run the benchmark rows and print one markdown table.

    python -m tests.benchmarks.run                 # full run (about 20 minutes)
    python -m tests.benchmarks.run --quick         # same code, short clocks (about 4 minutes)
    python -m tests.benchmarks.run --only tick,peers --json results.json

Rows (see README.md in this folder): tick, peers, loop, startup, traffic, memory, agent.
Progress goes to stderr; the table goes to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tests/benchmarks/run.py` works too
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "tests.benchmarks"

from tests.benchmarks.common import Config, Row

GROUPS = {
    "tick": "bench_tick",
    "peers": "bench_peers",
    "loop": "bench_training_loop",
    "startup": "bench_startup",
    "traffic": "bench_traffic",
    "memory": "bench_memory",
    "agent": "bench_agent",
    "mirror": "bench_mirror",
    "waits": "bench_waits",
    "quota": "bench_quota",
    "fleet": "bench_fleet",
    "record": "bench_record",
    "idle-server": "bench_idle_server",
    "footprint": "bench_footprint",
    "agent-attacks": "bench_agent_attacks",
    "server-attacks": "bench_server_attacks",
    "save-decision": "bench_save_decision",
}


def table(rows: list[Row]) -> str:
    lines = [
        "| # | measurement | value | target | verdict | notes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r.group, r.metric, r.value, r.target, r.status, r.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short clocks, for development")
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(GROUPS)}"
    )
    parser.add_argument("--heap-minutes", type=float, help="browser heap run length (row 6)")
    parser.add_argument("--json", type=Path, help="also write every row with raw numbers here")
    args = parser.parse_args(argv)

    wanted = [g.strip() for g in args.only.split(",") if g.strip()] or list(GROUPS)
    unknown = [g for g in wanted if g not in GROUPS]
    if unknown:
        parser.error(f"unknown row group(s): {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    cfg = Config.make(args.quick)
    if args.heap_minutes is not None:
        if not args.heap_minutes > 0:
            parser.error("--heap-minutes must be a positive number")
        cfg.heap_minutes = args.heap_minutes

    rows: list[Row] = []
    started = time.time()
    for name in wanted:
        t0 = time.monotonic()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        module = importlib.import_module(f"tests.benchmarks.{GROUPS[name]}")
        rows.extend(module.run(cfg))
        print(f"[bench] {name} done in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)

    load = os.getloadavg()
    header = (
        f"trainwatch_lab benchmarks, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
        f"{'quick' if cfg.quick else 'full'} run, {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"load average at end {load[0]:.1f}"
    )
    print(header + "\n")
    print(table(rows))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"header": header, "rows": [r.__dict__ for r in rows]}, indent=1, default=str
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
