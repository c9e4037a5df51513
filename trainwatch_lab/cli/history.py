"""``trainwatch-lab history [samples|events|why|export]``: the recorded history, replayed.

Reads the store read-only, so it works while a recorder writes and after every recorder
stopped (what a killed writer flushed last is read from its ``recent`` rows).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from datetime import datetime
from typing import Any, TextIO

from ..core.paths.names import printable
from ..core.usage import parse_when
from .common import RAW, UsageError, add_intermixed, dumps, table
from .record import add_store, store_path

EPILOG = """\
examples:
  trainwatch-lab history --since 8h                  every recorded series: min, mean, max, last
  trainwatch-lab history --since 2h --series 'disk:*:util' --format csv > util.csv
  trainwatch-lab history events --since 1d           warnings, processes, checkpoints, mounts
  trainwatch-lab history why                         how each run of the last day ended, and why
  trainwatch-lab history why train.py --since 12h    ... one script
  trainwatch-lab history export --since 3h -o report.json   for a bug report (commands redacted)
"""
VIEWS = ("samples", "events", "why", "export")


def when(text: str) -> float:
    """``8h`` (ago), ``2026-12-01T03:00``, ``03:00`` (today) or a Unix time -> Unix time:
    the one parser of every surface (core.usage.parse_when)."""
    try:
        return parse_when(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub: Any) -> None:
    history = add_intermixed(
        sub,
        "history",
        help="the recorded history: series, events, why a run ended, an export",
        description=(
            "Replay what `watch --record`, `serve --record`, `run` and the Jupyter server\n"
            "recorded on this machine, also after they restarted."
        ),
        epilog=EPILOG,
        formatter_class=RAW,
    )
    history.add_argument(
        "view", nargs="?", default="samples", choices=VIEWS, help="what to show (default: samples)"
    )
    history.add_argument(
        "target", nargs="?", metavar="NAME|PID", help="why: only runs of this script name or pid"
    )
    history.add_argument(
        "--since",
        type=when,
        metavar="WHEN",
        help="start: 8h, 30m, 2d ago, or a time (default: 1d ago)",
    )
    history.add_argument("--until", type=when, metavar="WHEN", help="end (default: now)")
    history.add_argument(
        "--series", metavar="GLOB", help="series to show, e.g. 'path:*:avail_bytes' (default: all)"
    )
    history.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="output format (default: table)",
    )
    history.add_argument(
        "-o", "--output", metavar="FILE", help="export: write here (default: stdout)"
    )
    add_store(history)


def run(args: argparse.Namespace) -> int:
    from ..core.record import Store, StoreError

    until = args.until if args.until is not None else time.time()
    since = args.since if args.since is not None else until - 86_400
    if since >= until:
        raise UsageError("--since must be before --until")
    try:
        store = Store(store_path(args), readonly=True)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    try:
        if not args.output:
            VIEW_RUN[args.view](store, args, since, until, sys.stdout)
            return 0
        try:  # opened once the store is: a bad store leaves no empty file behind
            with open(args.output, "w", encoding="utf-8") as out:
                VIEW_RUN[args.view](store, args, since, until, out)
        except OSError as exc:
            raise UsageError(f"{printable(args.output)}: {exc.strerror}") from None
    finally:
        store.close()
    return 0


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _iso(t: float) -> str:
    """ISO 8601 with the local offset (``2026-12-04T14:03:25.120+01:00``): what a sheet
    reads as a time, where epoch seconds read as a number."""
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="milliseconds")


def _cell(v: float | None) -> str:
    """A value as a sheet should get it: bytes and counts as full integers (80491400000, not
    8.04914e+10), others at full precision; empty when missing."""
    if v is None or v != v:
        return ""
    if v.is_integer() and abs(v) < 2**63:
        return str(int(v))
    return repr(v)


def _samples(store: Any, args: argparse.Namespace, since: float, until: float, out: TextIO) -> None:
    """The table (one series at a time), or every point as CSV or JSON, written as it is
    read: CSV a slice of time at a time, JSON a series at a time, so a week of every
    series never sits in memory at once (a week of 120 series at 1 s took 1.7 GB)."""
    if args.format == "table":
        out.write(_summary(store, args.series, since, until))
    elif args.format == "json":
        _json_points(store, store.keys(args.series), since, until, out)
    elif args.format == "csv":
        _csv_points(store, store.keys(args.series), since, until, out)
    else:
        raise AssertionError(args.format)


def _json_points(store: Any, keys: list[str], since: float, until: float, out: TextIO) -> None:
    """``{"key": {"t": [...], "v": [...]}, ...}``: series with a point in the window."""
    out.write("{")
    first = True
    for key in keys:
        ts, vs = store.read([key], since, until).get(key, ([], []))
        if not ts:
            continue
        out.write(("" if first else ", ") + dumps(key) + ": " + dumps({"t": ts, "v": vs}))
        first = False
    out.write("}\n")


def _csv_points(store: Any, keys: list[str], since: float, until: float, out: TextIO) -> None:
    """One row per time, one column per series with a point in the window, written a
    slice of time at a time (about ``record_csv_slice_points`` points each)."""
    keys = [k for k in keys if store.has_points(k, since, until)]
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "t", *keys])
    step = max(60.0, store.defaults.record_csv_slice_points / max(1, len(keys)))
    a = since
    while a <= until:
        b = min(until, a + step)
        columns = store.read(keys, a, b)
        index: dict[float, dict[str, float]] = {}
        for key, (ts, vs) in columns.items():
            for t, v in zip(ts, vs, strict=True):
                if t < b or b == until:  # a point on the boundary is the next slice's
                    index.setdefault(t, {})[key] = v
        for t in sorted(index):
            row = [index[t].get(k) for k in keys]
            writer.writerow([_iso(t), f"{t:.3f}", *(_cell(v) for v in row)])
        if b >= until:
            break
        a = b


def _summary(store: Any, pattern: str | None, since: float, until: float) -> str:
    """Per series: points, the first time, min, mean, max and the last value (whole blocks
    from their stored aggregates: a week reads the blocks at its ends, Store.summary)."""
    rows = [["series", "points", "first", "min", "mean", "max", "last"]]
    for key in store.keys(pattern):
        got = store.summary(key, since, until)
        if got is None or got.mean is None:
            continue
        stats = (got.lo, got.mean, got.hi, got.last)
        rows.append([key, str(got.points), _stamp(got.first), *(f"{v:.4g}" for v in stats)])
    if len(rows) == 1:
        return "nothing recorded in this window\n"
    return table(rows, right={1, 3, 4, 5, 6}) + "\n"


def _events(store: Any, args: argparse.Namespace, since: float, until: float, out: TextIO) -> None:
    from ..core.record.export import redact

    events = store.events(since, until)
    if args.format == "json":
        for e in events:
            out.write(dumps(redact(e.to_json())) + "\n")
        return
    if args.format == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["time", "kind", "subject", "text"])
        for e in events:
            writer.writerow([_stamp(e.t), e.kind, e.subject, redact(e.text)])
        return
    if not events:
        out.write("no events in this window\n")
        return
    rows = [["time", "kind", "subject", "text"]]
    rows += [[_stamp(e.t), e.kind, e.subject, redact(e.text)] for e in events]
    out.write(table(rows) + "\n")


def _why(store: Any, args: argparse.Namespace, since: float, until: float, out: TextIO) -> None:
    from ..core.record.export import redact
    from ..core.record.why import endings, explain

    found = [
        explain(store, e)
        for e in endings(store, since, until)
        if args.target is None or args.target in (e.name, str(e.pid))
    ]
    if args.format == "json":  # evidence quotes stderr: redacted like every other surface
        out.write(dumps([redact(e.to_json()) for e in found]) + "\n")
    elif not found:
        out.write("no run ended in this window\n")
    else:
        out.write("".join(f"{printable(redact(e.sentence))}\n" for e in found))


def _export(store: Any, args: argparse.Namespace, since: float, until: float, out: TextIO) -> None:
    from ..core.record.export import export

    out.write(dumps(export(store, since, until, args.series), indent=1) + "\n")


VIEW_RUN = {"samples": _samples, "events": _events, "why": _why, "export": _export}
