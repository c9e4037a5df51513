"""Where a warning found by training code goes: under the running cell, else the log.

Framework callbacks (integrations/) run inside ``trainer.fit()`` and know nothing of Jupyter;
the notebook layer knows the cell but imports no framework. The notebook registers a reporter
here when the extension loads (notebook.inline); without one, a warning is a log line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ..core.model import Alert

log = logging.getLogger("trainwatch_lab")

Reporter = Callable[[list[Alert]], bool]  # True: the user sees them (or saw them already)

_reporters: list[Reporter] = []
_lock = threading.Lock()


def add_reporter(fn: Reporter) -> None:
    with _lock:
        if fn not in _reporters:
            _reporters.append(fn)


def remove_reporter(fn: Reporter) -> None:
    with _lock:
        if fn in _reporters:
            _reporters.remove(fn)


def report(alerts: Sequence[Alert]) -> bool:
    """Show ``alerts`` through the newest reporter that takes them; otherwise log each one
    (warning, or error for critical). Returns True when a reporter took them."""
    items = list(alerts)
    if not items:
        return True
    with _lock:
        reporters = list(reversed(_reporters))
    for fn in reporters:
        try:
            if fn(items):
                return True
        except Exception:
            log.debug("trainwatch: a reporter failed", exc_info=True)
    for a in items:
        level = logging.ERROR if a.severity == "critical" else logging.WARNING
        log.log(level, "trainwatch [%s] %s Fix: %s", a.code, a.message, a.fix)
    return False
