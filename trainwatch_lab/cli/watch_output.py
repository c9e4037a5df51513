"""What ``trainwatch-lab watch`` prints for each sample: a block of tables, or a JSON line."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..advice.text import fill_columns, fmt_bytes, fmt_mbs, fmt_pct
from ..core.defaults import MB_PER_MIB
from ..core.model import Sample, path_devices
from ..core.paths.names import printable
from .common import dumps, print_alert, table


class WatchPrinter:
    """Human output of ``watch``: one block per sample, warnings only when they are new."""

    def __init__(self, sampler: Any, out: TextIO) -> None:
        self.sampler = sampler
        self.out = out
        self.active: set[tuple[str, str]] = set()
        self.noted: set[tuple[str, str]] = set()

    def __call__(self, sample: Sample) -> None:
        out = self.out
        out.write(f"\n{time.strftime('%H:%M:%S', time.localtime(sample.t))}\n")
        for name, text in sorted(sample.notes.items()):
            if (name, text) not in self.noted:
                self.noted.add((name, text))
                out.write(f"  note ({name}): {text}\n")
        print_disks(sample, out)
        print_paths(sample, out)
        print_processes(sample, out)
        print_waits(sample, out)
        for g in sample.gpus:
            util = "?" if g.util_pct is None else f"{g.util_pct:.0f} %"
            mem = f"{fmt_bytes(g.mem_used_bytes)} of {fmt_bytes(g.mem_total_bytes)}"
            out.write(f"  GPU {g.index} {g.name}: util {util}, memory {mem}\n")
        keys = {a.key for a in sample.warnings}
        for alert in sample.warnings:
            if alert.key not in self.active:
                print_alert(alert, out)
        self.active = keys
        out.flush()


def print_disks(sample: Sample, out: TextIO) -> None:
    """The iostat-like table of the devices under the watched paths; throughput in decimal
    MB/s, as the panel, the charts and the headline show it."""
    devices = path_devices(sample)
    rows = [["DEVICE", "r/s", "w/s", "rMB/s", "wMB/s", "r_await", "w_await", "aqu-sz", "%util"]]
    for dev in devices:
        d = sample.disks.get(dev)
        if d is None:
            continue
        rows.append(
            [
                dev,
                f"{d.r_s:.1f}",
                f"{d.w_s:.1f}",
                f"{d.rmb_s * MB_PER_MIB:.2f}",
                f"{d.wmb_s * MB_PER_MIB:.2f}",
                f"{d.r_await:.2f}",
                f"{d.w_await:.2f}",
                f"{d.aqu_sz:.2f}",
                f"{d.util:.1f}",
            ]
        )
    if len(rows) > 1:
        out.write(table(rows, right=set(range(1, 9)), indent="  ") + "\n")
    elif devices and "disks" not in sample.notes:
        out.write(f"  {', '.join(devices)}: measuring (rates need two samples)\n")
    else:
        out.write("  no block device under the watched paths (memory or network fs)\n")


def print_paths(sample: Sample, out: TextIO) -> None:
    """Free space, fill rate and time to full of each watched path."""
    rows = [["PATH", "FS TYPE", "FREE", "USED", "FILL RATE", "FULL IN"]]
    for path, p in sorted(sample.paths.items()):
        if not p.responsive:
            rows.append([path, p.fstype or "?", "no answer", "", "", ""])
            continue
        rate, ttf = fill_columns(p.fill)
        used = fmt_pct(p.used_fraction)  # df's Use%
        name = path if p.exists or p.error else f"{path} (not created yet)"
        rows.append([name, p.fstype or "?", fmt_bytes(p.avail_bytes), used, rate, ttf])
    out.write(table(rows, right={2, 3, 4, 5}, indent="  ") + "\n")


def print_processes(sample: Sample, out: TextIO) -> None:
    """One line per training process found: command, GPUs, memory, I/O, where it waits."""
    for p in sample.processes:
        facts = [", ".join(p.reasons)]
        if p.gpus:
            facts.append(f"GPU {','.join(map(str, p.gpus))} {fmt_bytes(p.gpu_mem_bytes)}")
        if p.io is not None:
            facts.append(f"writes {fmt_mbs(p.io.write_chars_s)}")
        mt = p.main_thread or {}
        if mt.get("blocked") and mt.get("syscall"):
            where = f" of {mt['fd_path']}" if mt.get("fd_path") else ""
            facts.append(f"blocked in {mt['syscall']}(){where}")
        out.write(f"  pid {p.pid} {printable(p.command)}: {printable('; '.join(facts))}\n")


def print_waits(sample: Sample, out: TextIO) -> None:
    """``watch --pid``: the share of the last interval the process waited on each path."""
    pr = sample.process
    if pr is None or pr.waits_elsewhere is None:  # not measured
        return
    for who, waits, calls in (
        (f"pid {pr.pid}", pr.waits, pr.wait_calls),
        (f"its {pr.wait_workers} workers", pr.worker_waits, pr.worker_wait_calls),
    ):
        parts = []
        for path, fraction in sorted(waits.items(), key=lambda kv: -kv[1]):
            top = max(calls.get(path, {}).items(), key=lambda kv: kv[1], default=None)
            parts.append(f"{path} {fmt_pct(fraction)}" + (f" ({top[0]})" if top else ""))
        if who.startswith("pid") and pr.waits_elsewhere:
            parts.append(f"other files {fmt_pct(pr.waits_elsewhere)}")
        if not parts:
            continue
        out.write(f"  {who} waiting on storage: {printable(', '.join(parts))}\n")


def json_line(sample: Sample) -> None:
    """``watch --json``: one object per sample per line, flushed at once (for pipes)."""
    sys.stdout.write(dumps(sample.to_json()) + "\n")
    sys.stdout.flush()
