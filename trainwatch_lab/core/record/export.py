"""A window of the history to attach to a bug report, with command lines redacted.

Command lines can carry secrets (``--token``, ``--password``, a URL with credentials), so
an export keeps a command's program and script and drops its arguments, in event data and
in texts (the backquoted commands of path labels). ARCHITECTURE.md asks for one redaction
function for everything that leaves the process; this is the history's until the lead
merges it with the others (see the branch report).
"""

from __future__ import annotations

import re
from typing import Any

from .store import Store

COMMAND_KEYS = ("command", "argv")
_QUOTED = re.compile(r"`([^`]*)`")
REDACTED = "[arguments redacted]"


def redact_command(command: str) -> str:
    """``python train.py --token abc`` -> ``python train.py [arguments redacted]``."""
    words = command.split()
    if not words:
        return command
    keep = 1
    for i, word in enumerate(words[1:], start=1):
        if word.endswith(".py") or (i == 1 and word in ("-m",)):
            keep = i + 1 + (word == "-m")
            break
    kept = " ".join(words[:keep])
    return kept if keep >= len(words) else f"{kept} {REDACTED}"


def redact_text(text: str) -> str:
    return _QUOTED.sub(lambda m: f"`{redact_command(m.group(1))}`", text)


def redact(obj: Any) -> Any:
    """A copy of JSON-like ``obj`` with every command redacted."""
    if isinstance(obj, dict):
        return {
            k: (
                redact_command(" ".join(v) if isinstance(v, list) else str(v))
                if k in COMMAND_KEYS and v
                else redact(v)
            )
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
