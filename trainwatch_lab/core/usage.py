"""Words shared by the two command lines, the ``trainwatch-lab`` CLI and the ``%trainwatch``
magic: a duration written as a user writes it (``2s``, ``10m``), a moment of the recorded
history (``8h`` ago, ``03:00``, an ISO time), and the option a typo most likely meant. Both
surfaces import this layer, so they accept and suggest the same things.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import time
from collections.abc import Iterable

_DURATION = re.compile(
    r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(ms|s|sec|m|min|h|hr)?\s*$", re.IGNORECASE
)
_UNIT_S = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0}
DURATION_HELP = "a number of seconds or a duration like 500ms, 30s, 10m, 1h"


def parse_seconds(text: str) -> float:
    """``10m``, ``90s``, ``1h``, ``600`` (seconds), ``500ms``, ``-1`` -> seconds. A signed
    number is a number: its range is the caller's to check, which can say what is wrong.
    Raises ValueError("must be <DURATION_HELP>; got '...'")."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"must be {DURATION_HELP}; got {text!r}")
    value = float(match.group(1))
    unit = (match.group(2) or "").lower() or None
    return value / 1000.0 if unit == "ms" else value * _UNIT_S[unit]


_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")  # fullmatch: "8h\n" is no age
_AGO_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
WHEN_HELP = "8h, 30m, 2d (ago), 2026-12-01T03:00 or 03:00 (today)"


def parse_when(text: str, now: float | None = None) -> float:
    """``8h`` (ago), ``2026-12-01T03:00``, ``03:00`` (today) or a Unix time -> Unix time:
    the ``--since``/``--until`` of ``trainwatch-lab history`` and of ``%trainwatch``.
    Raises ValueError("expected <WHEN_HELP>, got '...'")."""
    text = text.strip()
    m = _AGO.fullmatch(text)
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _AGO_UNIT_S[m.group(2)]
    try:
        if text.replace(".", "", 1).isdigit() and len(text) > 6:
            return float(text)
        if ":" in text and "-" not in text:
            return dt.datetime.combine(dt.date.today(), dt.time.fromisoformat(text)).timestamp()
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(f"expected {WHEN_HELP}, got {text!r}") from None


def unknown_option(token: str, options: Iterable[str]) -> str:
    """``unknown option '--jsn', did you mean --json?``: the option an abbreviation begins,
    else the closest real option, if any is close (``--name=value`` is judged by its name)."""
    name = token.partition("=")[0]
    options = list(options)
    # an abbreviation means the option it begins (--int: --interval, not the closer --until)
    close = [o for o in options if len(name) > 3 and o.startswith(name)][:1]
    close = close or difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    hint = f", did you mean {close[0]}?" if close else ""
    return f"unknown option {name!r}{hint}"
