"""What a save did when the disk was full, told three ways: a recorded event (``history
events`` and ``history why`` tell it after the run), the inline warning (fix.report: under
the running cell, else a log line) and the notification channels (fix.report.notify).

Only the rare decisions come here (room made, a fallback taken, a pause, a resume, giving
up): an ordinary save records nothing and costs nothing. Recording opens the user's history
(core.record) for one short transaction; a history that cannot be written costs a debug
line, never the save.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ..core.model import Alert
from .report import notify, report

log = logging.getLogger(__name__)

# the event kinds (core.record.why reads them back by the ``save-`` prefix)
ROOM_MADE = "save-room-made"
REDIRECTED = "save-redirected"
PAUSED = "save-paused"
RESUMED = "save-resumed"
GAVE_UP = "save-gave-up"


def record(kind: str, subject: str, text: str, **data: Any) -> None:
    """One event in the recorded history, with this process's pid (``history why`` ties it
    to the run that made it); best effort."""
    try:
        from ..core.record import Event, Store, choose

        store = Store(choose().path, role="save")
        try:
            store.register()
            store.add_events(
                [Event(time.time(), kind, subject, text, {**data, "pid": os.getpid()})]
            )
        finally:
            store.close()
    except Exception:  # the history is a record of the run, never a reason to stop it
        log.debug("trainwatch: could not record %s", kind, exc_info=True)


def tell(alert: Alert, state: str = "started") -> None:
    """The warning inline (or logged) and on every notification channel; that it cleared
    goes to the channels only (the caller logs what happened instead)."""
    if state == "started":
        report([alert])
    notify(alert, state)
