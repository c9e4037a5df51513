"""What a save did when the disk was full, told three ways: a recorded event (``history
events`` and ``history why`` tell it after the run), the inline warning (fix.report: under
the running cell, else a log line) and the notification channels (fix.report.notify).

Only the rare decisions come here (room made, a fallback taken, a pause, a resume, giving
up): an ordinary save records nothing and costs nothing. They are recorded on a thread of
their own, into the user's history (core.record) kept open by it; a history that cannot be
written costs a debug line, never the save, and never a wait of the training thread.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from typing import Any

from ...core.defaults import DEFAULTS
from ...core.model import Alert
from ..report import notify, report

log = logging.getLogger(__name__)

# the event kinds (core.record.why reads them back by the ``save-`` prefix)
ROOM_MADE = "save-room-made"
REDIRECTED = "save-redirected"
PAUSED = "save-paused"
RESUMED = "save-resumed"
GAVE_UP = "save-gave-up"


class _Writer:
    """One thread of the process records its save events: opening the history as a
    writer checks the file and may wait for the server's recorder to commit (up to its
    busy timeout), which the training thread that is saving must never do. The history
    is opened once, and this process is one writer of it however many events it tells."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(DEFAULTS.save_events_queued)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._store: Any = None

    def put(self, event: Any) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="trainwatch-save-events", daemon=True
                )
                self._thread.start()
                atexit.register(self.drain, DEFAULTS.save_events_exit_wait_s)
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            log.debug("trainwatch: too many save events waiting; %s not recorded", event.kind)

    def drain(self, timeout: float) -> None:
        """At exit, the events told last (a save that gave up, then the error) land."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.05)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                self._write(event)
            except Exception:  # the history is a record of the run, never a reason to stop it
                log.debug("trainwatch: could not record %s", event.kind, exc_info=True)
                self._close()
            finally:
                self._queue.task_done()

    def _write(self, event: Any) -> None:
        from ...core.record import Store, choose

        path = choose().path  # (rare events: judged each time, as the user may move it)
        if self._store is not None and self._store.path != path:
            self._close()
        if self._store is None:
            store = Store(path, role="save")
            try:
                store.register()
            except BaseException:
                store.close()
                raise
            self._store = store
        self._store.add_events([event])

    def _close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()


_writer = _Writer()


def record(kind: str, subject: str, text: str, **data: Any) -> None:
    """One event in the recorded history, with this process's pid (``history why`` ties it
    to the run that made it); best effort, and written on a thread of its own."""
    from ...core.record import Event

    _writer.put(Event(time.time(), kind, subject, text, {**data, "pid": os.getpid()}))


def tell(alert: Alert, state: str = "started") -> None:
    """The warning inline (or logged) and on every notification channel; that it cleared
    goes to the channels only (the caller logs what happened instead)."""
    if state == "started":
        report([alert])
    notify(alert, state)
