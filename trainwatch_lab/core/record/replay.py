"""A window of the recorded history, read for a replay in the notebook (issue 27, item 5).

What a replay draws and says, read in one go from the machine's store, read-only: the
charts' series aligned on one time axis (core.record.query.chart, thinned to ``points``
bucket means), the events (commands redacted) and how each run that ended in the window
ended, with its sentence and evidence (core.record.why). Where the store is comes from
core.record.location.choose, the same place every recorder writes.

Meant for a helper thread (the store may sit on a slow disk): nothing here knows Jupyter.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..defaults import DEFAULTS, Defaults
from ..usage import parse_when
from .location import choose
from .query import chart, ended, events

# the series a replay draws: GPU use, disk throughput, space per path (core.history.flatten)
PATTERNS = ("gpu:*:util_pct", "gpu:*:mem_*_bytes", "disk:*:[rw]mb_s", "path:*:*_bytes")
POINTS = 600  # per series: the charts show at most 120 buckets, so 5 samples each
MAX_EVENTS = 1000
DEFAULT_SPAN_S = 86_400.0  # a window given only its end: the day before it
HOW_TO_RECORD = (
    "recording is on by default in the Jupyter server (c.TrainWatch.record = True); from a "
    "terminal: trainwatch-lab watch --record PATH, or trainwatch-lab run -- python train.py"
)


class NoHistory(LookupError):
    """No recorded history to replay: the message says where we looked and how to record."""


@dataclass
class Recorded:
    """A replayed window: ``t`` and each ``series`` (None where a value is missing) aligned."""

    path: str
    since: float
    until: float
    t: list[float] = field(default_factory=list)
    series: dict[str, list[float | None]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    endings: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def moment(value: Any, what: str, now: float | None = None) -> float:
    """A ``since``/``until`` -> a Unix time: seconds ago (a number), ``"8h"`` / ``"03:00"`` /
    an ISO time (what ``--since`` takes on the CLI and the magic: core.usage.parse_when), or
    a datetime. ValueError, one line, otherwise."""
    now = time.time() if now is None else now
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return parse_when(value, now)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{what} must be seconds ago (0 or more), got {value!r}")
        return now - float(value)
    raise ValueError(
        f"{what} must be seconds ago, a time like '8h' or '03:00', or a datetime; got {value!r}"
    )


def window(since: Any, until: Any = None, now: float | None = None) -> tuple[float, float]:
    """(since, until) as Unix times; ``until`` None is now, ``since`` None a day before
    ``until`` (as ``trainwatch-lab history``). ValueError when not in order."""
    now = time.time() if now is None else now
    end = now if until is None else moment(until, "until", now)
    start = end - DEFAULT_SPAN_S if since is None else moment(since, "since", now)
    if start >= end:
        raise ValueError(f"since ({_stamp(start)}) must be before until ({_stamp(end)})")
    return start, end


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def store_path(explicit_file: str | None = None) -> str:
    """The store every recorder of this machine writes to, when it exists; NoHistory (one
    line: where we looked, how to turn recording on) otherwise."""
    try:
        path = choose(explicit_file=explicit_file).path
    except LookupError as exc:
        raise NoHistory(f"no recorded history: {exc}; {HOW_TO_RECORD}") from None
    if not os.path.exists(path):
        raise NoHistory(f"no recorded history at {path}; {HOW_TO_RECORD}")
    return path


def align(found: dict[str, dict[str, list[Any]]]) -> tuple[list[float], dict[str, list[Any]]]:
    """Series of their own times -> one time axis and each series on it (None: no point)."""
    times = sorted({t for s in found.values() for t in s["t"]})
    index = {t: i for i, t in enumerate(times)}
    out: dict[str, list[Any]] = {}
    for key, s in found.items():
        column: list[Any] = [None] * len(times)
        for t, v in zip(s["t"], s["v"], strict=True):
            column[index[t]] = v
        out[key] = column
    return times, out


def load(
    since: float,
    until: float,
    path: str | None = None,
    points: int = POINTS,
    defaults: Defaults = DEFAULTS,
) -> Recorded:
    """Read the window ``[since, until]`` of the store at ``path`` (default: this machine's,
    store_path); NoHistory when there is none."""
    path = path or store_path()
    found: dict[str, dict[str, list[Any]]] = {}
    truncated = False
    for pattern in PATTERNS:
        answer = chart(path, since, until, pattern, points, defaults)
        found.update(answer["series"])
        truncated = truncated or answer["truncated"]
    t, series = align(found)
    return Recorded(
        path=path,
        since=since,
        until=until,
        t=t,
        series=series,
        events=events(path, since, until, MAX_EVENTS)["events"],
        endings=ended(path, since, until)["endings"],
        truncated=truncated,
    )
