"""``trainwatch-lab history [samples|events|why|export]``: the recorded history, replayed.

Reads the store read-only, so it works while a recorder writes and after every recorder
stopped (what a killed writer flushed last is read from its ``recent`` rows).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from datetime import datetime
from typing import Any

from ..core.paths.names import printable
from ..core.usage import parse_when
from .common import RAW, UsageError, dumps, table
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
    history = sub.add_parser(
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
        out = VIEW_RUN[args.view](store, args, since, until)
    finally:
        store.close()
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(out)
        except OSError as exc:
            raise UsageError(f"{printable(args.output)}: {exc.strerror}") from None
    else:
        sys.stdout.write(out)
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


def _samples(store: Any, args: argparse.Namespace, since: float, until: float) -> str:
    if args.format == "table":  # one series at a time: a week of every series stays small
        return _summary(store, args.series, since, until)
    columns = store.read(store.keys(args.series), since, until)
    columns = {k: c for k, c in columns.items() if c[0]}
    if args.format == "json":
        return dumps({k: {"t": ts, "v": vs} for k, (ts, vs) in columns.items()}) + "\n"
    if args.format == "csv":
        times = sorted({t for ts, _ in columns.values() for t in ts})
        index = {k: dict(zip(ts, vs, strict=True)) for k, (ts, vs) in columns.items()}
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["time", "t", *columns])
        for t in times:
            row = [index[k].get(t) for k in columns]
            writer.writerow([_iso(t), f"{t:.3f}", *(_cell(v) for v in row)])
        return buf.getvalue()
    raise AssertionError(args.format)


def _summary(store: Any, pattern: str | None, since: float, until: float) -> str:
    """Per series: points, the first time, min, mean, max and the last value."""
    rows = [["series", "points", "first", "min", "mean", "max", "last"]]
    for key in store.keys(pattern):
        ts, vs = store.read([key], since, until).get(key, ([], []))
        real = [v for v in vs if v == v]
        if not real:
            continue
        mean = sum(real) / len(real)
        stats = (min(real), mean, max(real), real[-1])
        rows.append([key, str(len(ts)), _stamp(ts[0]), *(f"{v:.4g}" for v in stats)])
    if len(rows) == 1:
        return "nothing recorded in this window\n"
    return table(rows, right={1, 3, 4, 5, 6}) + "\n"


def _events(store: Any, args: argparse.Namespace, since: float, until: float) -> str:
    from ..core.record.export import redact

    events = store.events(since, until)
    if args.format == "json":
        return "".join(dumps(redact(e.to_json())) + "\n" for e in events)
    if args.format == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["time", "kind", "subject", "text"])
        for e in events:
            writer.writerow([_stamp(e.t), e.kind, e.subject, redact(e.text)])
        return buf.getvalue()
    if not events:
        return "no events in this window\n"
    rows = [["time", "kind", "subject", "text"]]
    rows += [[_stamp(e.t), e.kind, e.subject, redact(e.text)] for e in events]
    return table(rows) + "\n"


def _why(store: Any, args: argparse.Namespace, since: float, until: float) -> str:
    from ..core.record.export import redact
    from ..core.record.why import endings, explain

    found = [
        explain(store, e)
        for e in endings(store, since, until)
        if args.target is None or args.target in (e.name, str(e.pid))
    ]
    if args.format == "json":  # evidence quotes stderr: redacted like every other surface
        return dumps([redact(e.to_json()) for e in found]) + "\n"
    if not found:
        return "no run ended in this window\n"
    return "".join(f"{printable(redact(e.sentence))}\n" for e in found)


def _export(store: Any, args: argparse.Namespace, since: float, until: float) -> str:
    from ..core.record.export import export

    return dumps(export(store, since, until, args.series), indent=1) + "\n"


VIEW_RUN = {"samples": _samples, "events": _events, "why": _why, "export": _export}
