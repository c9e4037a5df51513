"""A window of the history to attach to a bug report, with every secret redacted.

Command lines, texts and labels can carry secrets (``--token``, ``HF_TOKEN=...``, a URL with
credentials): everything the history gives out goes through ``core.redact``, the one
redaction of everything that leaves the process (ARCHITECTURE.md's trust boundaries).
"""

from __future__ import annotations

from typing import Any

from ..redact import redact as redact_text
from .store import Store


def redact(obj: Any) -> Any:
    """A copy of JSON-like ``obj`` with every string redacted (an argv list joined first)."""
    if isinstance(obj, dict):
        return {
            k: redact_text(" ".join(map(str, v)))
            if k == "argv" and isinstance(v, list)
            else redact(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def export(store: Store, since: float, until: float, pattern: str | None = None) -> dict[str, Any]:
    """``{"since", "until", "series": {key: {"t": [...], "v": [...]}}, "events": [...]}``."""
    columns = store.read(store.keys(pattern), since, until)
    series = {
        k: {"t": ts, "v": [v if v == v else None for v in vs]}
        for k, (ts, vs) in columns.items()
        if ts
    }
    events = [redact(e.to_json()) for e in store.events(since, until)]
    return {"since": since, "until": until, "series": series, "events": events}
