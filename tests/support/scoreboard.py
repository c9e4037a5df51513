"""The precision suite's scoreboard: every scenario says which warnings must appear and which
must not; each outcome is counted per warning code (true alarms, false alarms, misses, true
silences) and printed as a table after the run (tests/support/summaries.py, which also adds
up the counts of pytest-xdist workers)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

# code -> [true alarms, false alarms, misses, true silences]
_SCORES: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
_WRONG: list[str] = []


def judge_outcome(
    scenario: str,
    fired: Iterable[str],
    must: Iterable[str] = (),
    must_not: Iterable[str] = (),
) -> list[str]:
    """Score one scenario; returns what it got wrong ("false alarm: slow-mount", ...)."""
    fired, must = set(fired), set(must)
    wrong = []
    for code in sorted(must | set(must_not)):
        expected, seen = code in must, code in fired
        score = _SCORES[code]
        score[(0 if seen else 2) if expected else (1 if seen else 3)] += 1
        if expected != seen:
            wrong.append(f"{'miss' if expected else 'false alarm'}: {code}")
    _WRONG.extend(f"{scenario}: {w}" for w in wrong)
    return wrong


def export() -> dict[str, Any]:
    """The counts as plain data (what a pytest-xdist worker sends its controller)."""
    return {"scores": {code: list(s) for code, s in _SCORES.items()}, "wrong": list(_WRONG)}


def merge(part: dict[str, Any]) -> None:
    """Add another process's counts to these."""
    for code, counts in part["scores"].items():
        _SCORES[code] = [a + b for a, b in zip(_SCORES[code], counts, strict=True)]
    _WRONG.extend(part["wrong"])


def scoreboard() -> str:
    """The table, one row per warning code, then what went wrong; "" when nothing was judged."""
    if not _SCORES:
        return ""
    rows = [("warning code", "true alarms", "false alarms", "misses", "true silences")]
    rows += [(code, *map(str, _SCORES[code])) for code in sorted(_SCORES)]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.extend(_WRONG)
    return "\n".join(lines)
