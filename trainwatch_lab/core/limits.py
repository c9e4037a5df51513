"""Size and character limits of every input (issue 24), and how a refused input is shown.

The numbers live in core.defaults; here is how they are applied: a path is refused when it
is longer than Linux's PATH_MAX or holds a control character (a newline forges a log line, an
escape sequence repaints a terminal), and whatever is refused is shown abbreviated, so that
a refusal is one short line however large the input was.
"""

from __future__ import annotations

import unicodedata

from .defaults import PARAM_MAX, PATH_MAX, REQUEST_BODY_MAX, WS_MESSAGE_MAX, WS_STALLED_CLOSE_S

__all__ = [
    "PARAM_MAX",
    "PATH_MAX",
    "REQUEST_BODY_MAX",
    "WS_MESSAGE_MAX",
    "WS_STALLED_CLOSE_S",
    "abbreviate",
    "clamp",
    "path_problem",
    "shown",
]

SHOWN_CHARS = 80  # of an input quoted in a refusal
LINE_CHARS = 900  # a refusal, whole: under 1 KB in a JSON reply
CONTROL_NAMES = {"\x00": "NUL", "\n": "newline", "\r": "carriage return", "\x1b": "escape"}


def abbreviate(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut in its middle past ``limit`` characters, control characters escaped:
    the start and the end of a path are what tell it apart."""
    safe = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text[: limit * 4])
    if len(text) <= limit and len(safe) <= limit:
        return safe
    head = limit * 2 // 3
    tail_text = text[-(limit - head - 1) :]
    tail = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in tail_text)
    return f"{safe[:head]}…{tail[-(limit - head - 1) :]}"


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for a refusal, abbreviated (never the whole of a huge input)."""
    if isinstance(value, str):
        return repr(abbreviate(value, limit))
    if isinstance(value, (int, float, bool)) or value is None:
        text = (
            repr(value)
            if not isinstance(value, int) or value.bit_length() < 64
            else "a huge number"
        )
        return abbreviate(text, limit)
    return f"a JSON {type(value).__name__}"


def clamp(line: str, limit: int = LINE_CHARS) -> str:
    """One line of at most ``limit`` characters: the last guard before a refusal leaves."""
    one = " ".join(line.splitlines())
    return one if len(one) <= limit else abbreviate(one, limit)


def path_problem(text: str) -> str | None:
    """Why ``text`` can name no file (too long, a control character), or None."""
    if len(text) >= PATH_MAX or len(text.encode("utf-8", "surrogatepass")) >= PATH_MAX:
        return f"is longer than PATH_MAX ({PATH_MAX} bytes)"
    bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        name = CONTROL_NAMES.get(bad)
        return f"holds a control character ({name + ', ' if name else ''}{bad!a})"
    return None
