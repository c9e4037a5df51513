"""Where a warning found by training code goes: under the running cell, else the log.

Framework callbacks (integrations/) run inside ``trainer.fit()`` and know nothing of Jupyter;
the notebook layer knows the cell but imports no framework. The notebook registers a reporter
here when the extension loads (notebook.inline); without one, a warning is a log line.

Notification channels (a webhook: advice.notify.Notifier.send, registered by ``%trainwatch
--notify`` or ``integrations.notify_to``) hear the warnings training code raises itself
(a save paused for space) through ``notify``: fix/ imports no advice, so they come to it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ..core.model import Alert

log = logging.getLogger("trainwatch_lab")

Reporter = Callable[[list[Alert]], bool]  # True: the user sees them (or saw them already)
Channel = Callable[[Alert, str], None]  # (the warning, "started" or "cleared"); never blocks

_reporters: list[Reporter] = []
_channels: list[Channel] = []
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


def add_channel(fn: Channel) -> None:
    with _lock:
        if fn not in _channels:
            _channels.append(fn)


def remove_channel(fn: Channel) -> None:
    with _lock:
        if fn in _channels:
            _channels.remove(fn)


def notify(alert: Alert, state: str = "started") -> int:
    """Hand ``alert`` to every notification channel (each queues it, none blocks); returns
    how many took it."""
    with _lock:
        channels = list(_channels)
    taken = 0
    for fn in channels:
        try:
            fn(alert, state)
            taken += 1
        except Exception:
            log.debug("trainwatch: a notification channel failed", exc_info=True)
    return taken
