"""What a replay asks of the history: a chart's points, the events, how runs ended.

One function per question, each opening the file read-only and answering JSON-ready data,
so the server's endpoints (and later the notebook) share them. A chart never gets more than
``points`` points a series: a window longer than that is thinned to bucket means, the
resolution a chart of that width can show.
"""

from __future__ import annotations

import math
from typing import Any

from ..defaults import DEFAULTS, Defaults
from .export import redact
from .maintain import Buckets, bucket_means, fold
from .store import Store
from .why import endings, explain

MAX_POINTS = 10_000  # per series in one answer, whatever is asked


def chart(
    path: str,
    since: float,
    until: float,
    pattern: str | None,
    points: int,
    defaults: Defaults = DEFAULTS,
) -> dict[str, Any]:
    """``{"since", "until", "series": {key: {"t": [...], "v": [...]}}, "decoded",
    "truncated"}``, NaN as None. One series at a time, each read in slices folded into
    the chart's buckets, so memory holds one slice whatever the window; after
    ``record_query_max_decoded`` points decoded the answer stops there, ``truncated``."""
    points = max(2, min(points, MAX_POINTS))
    store = Store(path, readonly=True, defaults=defaults)
    series = {}
    truncated = False
    try:
        for key in store.keys(pattern):
            if store.decoded >= defaults.record_query_max_decoded:
                truncated = True
                break
            ts, vs, complete = _series(store, key, since, until, points)
            truncated = truncated or not complete
            if ts:
                series[key] = {"t": ts, "v": [v if v == v else None for v in vs]}
    finally:
        store.close()
    return {
        "since": since,
        "until": until,
        "series": series,
        "decoded": store.decoded,
        "truncated": truncated,
    }


def _series(
    store: Store, key: str, since: float, until: float, points: int
) -> tuple[list[float], list[float], bool]:
    """One series' points in the window: as recorded while there are at most ``points``,
    else bucket means; and whether the whole window was read (False: out of budget)."""
    step = (until - since) / points
    slice_s = step * max(1, math.ceil(store.defaults.record_query_slice_s / step))
    raw_ts: list[float] = []
    raw_vs: list[float] = []
    sums: Buckets | None = None  # once there are more than ``points``: buckets only
    a, complete = since, False
    while store.decoded < store.defaults.record_query_max_decoded:
        # slices end on bucket boundaries, so folding them one by one gives the same means
        b = min(until, (math.floor(a / slice_s) + 1) * slice_s)
        ts, vs = store.read([key], a, b).get(key, ([], []))
        if b < until:  # the boundary's point belongs to the next slice
            n = len(ts)
            while n and ts[n - 1] >= b:
                n -= 1
            ts, vs = ts[:n], vs[:n]
        if sums is None:
            raw_ts += ts
            raw_vs += vs
            if len(raw_ts) > points:
                sums = {}
                fold(sums, raw_ts, raw_vs, step)
                raw_ts, raw_vs = [], []
        else:
            fold(sums, ts, vs, step)
        if b >= until:
            complete = True
            break
        a = b
    if sums is None:
        return raw_ts, raw_vs, complete
    ts, vs = bucket_means(sums, step)
    return ts, vs, complete


def events(path: str, since: float, until: float, limit: int) -> dict[str, Any]:
    """``{"events": [...]}``, oldest first, commands redacted, at most ``limit``."""
    store = Store(path, readonly=True)
    try:
        found = store.events(since, until, limit=limit)
    finally:
        store.close()
    return {"events": [redact(e.to_json()) for e in found]}


def ended(path: str, since: float, until: float) -> dict[str, Any]:
    """``{"endings": [{name, pid, t, sentence, cause, evidence, exit, started, requested,
    badly}]}``, one per process (core.record.why)."""
    store = Store(path, readonly=True)
    try:
        found = [redact(explain(store, e).to_json()) for e in endings(store, since, until)]
    finally:
        store.close()
    return {"endings": found}
