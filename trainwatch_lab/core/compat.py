"""What the Pythons we claim (3.10 and newer) do differently, in one place.

``BaseException.add_note`` came with 3.11: on 3.10 a note is kept in ``__notes__`` all the same
(what 3.11's ``add_note`` appends to), so code and tests read it one way; 3.10's traceback does
not print it.
"""

from __future__ import annotations


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)``, also on Python 3.10."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]
