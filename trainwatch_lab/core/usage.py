"""Words shared by the two command lines, the ``trainwatch-lab`` CLI and the ``%trainwatch``
magic: a duration written as a user writes it (``2s``, ``10m``), and the option a typo most
likely meant. Both surfaces import this layer, so they accept and suggest the same things.
"""

from __future__ import annotations

import difflib
import re
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


def unknown_option(token: str, options: Iterable[str]) -> str:
    """``unknown option '--jsn', did you mean --json?``: the closest real option, if any is
    close (``--name=value`` is judged by its name)."""
    name = token.partition("=")[0]
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    hint = f", did you mean {close[0]}?" if close else ""
    return f"unknown option {name!r}{hint}"
