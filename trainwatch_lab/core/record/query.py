"""What a replay asks of the history: a chart's points, the events, how runs ended.

One function per question, each opening the file read-only and answering JSON-ready data,
so the server's endpoints (and later the notebook) share them. A chart never gets more than
``points`` points a series: a window longer than that is thinned to bucket means, the
resolution a chart of that width can show.
"""

from __future__ import annotations

from typing import Any

from .export import redact
from .maintain import means
from .store import Store
from .why import endings, explain

MAX_POINTS = 10_000  # per series in one answer, whatever is asked


def chart(
    path: str, since: float, until: float, pattern: str | None, points: int
) -> dict[str, Any]:
    """``{"since", "until", "series": {key: {"t": [...], "v": [...]}}}``, NaN as None."""
    points = max(2, min(points, MAX_POINTS))
    store = Store(path, readonly=True)
    try:
        columns = store.read(store.keys(pattern), since, until)
    finally:
        store.close()
    series = {}
    for key, (ts, vs) in columns.items():
        if len(ts) > points:
            ts, vs = means(ts, vs, (until - since) / points)
        if ts:
            series[key] = {"t": ts, "v": [v if v == v else None for v in vs]}
    return {"since": since, "until": until, "series": series}


def events(path: str, since: float, until: float, limit: int) -> dict[str, Any]:
    """``{"events": [...]}``, oldest first, commands redacted, at most ``limit``."""
    store = Store(path, readonly=True)
    try:
        found = store.events(since, until, limit=limit)
    finally:
        store.close()
    return {"events": [redact(e.to_json()) for e in found]}


def ended(path: str, since: float, until: float) -> dict[str, Any]:
    """``{"endings": [{name, pid, t, sentence, cause, evidence, exit, started}]}``."""
    store = Store(path, readonly=True)
    try:
        found = [redact(explain(store, e).to_json()) for e in endings(store, since, until)]
    finally:
        store.close()
    return {"endings": found}
