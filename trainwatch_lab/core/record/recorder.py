"""The Recorder: a Sampler subscriber that writes what the sampler sees to the history.

Sampler -> History -> Recorder -> store (ARCHITECTURE.md). The subscriber itself only
appends numbers to bounded in-memory columns and diffs the events (core.record.events): the
SQLite writes, the free-space check and the maintenance run on the recorder's own thread,
every ``record_flush_s``, so a slow disk or a busy store never delays a tick, and nothing
it does can raise into the sampler. While free space on a recorded filesystem falls fast,
or a fill warning is raised, the subscriber wakes the thread to flush at once
(``record_hurry_drop_share``): a sampler started mid-fill reads that past and judges the
fill as the writer does. Below ``record_min_free_bytes`` free on the store's filesystem,
or when SQLite says the disk is full, recording pauses with a note (what it held stays in
memory, bounded) and resumes by itself when space returns.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from ..defaults import DEFAULTS, Defaults
from ..history import flatten, key_to_str
from ..model import Sample
from .events import EventWatch, KernelAsked
from .maintain import maintain
from .proc_connector import shared
from .store import Event, Store, StoreError

log = logging.getLogger(__name__)

FILL_CODES = ("disk-filling", "disk-almost-full")  # raised: the next tick flushes


class Recorder:
    """Subscribe with ``sampler.subscribe(recorder)``; ``start()`` its thread, ``close()`` at
    the end (a last flush). ``every`` says how often a sample is kept (seconds; a callable
    is asked each tick: 1 s while someone looks, 10 s otherwise). ``exits``: learn the exit
    status of the training processes and kernels it sees end from the kernel's process
    connector (core.record.proc_connector; as root, where the kernel allows it).
    ``kernel_asked``: which kernel ends were asked for (core.record.events.EventWatch)."""

    def __init__(
        self,
        path: str,
        role: str = "recorder",
        every: float | Callable[[], float] = DEFAULTS.record_look_every_s,
        defaults: Defaults = DEFAULTS,
        clock: Callable[[], float] = time.time,
        exits: bool = True,
        kernel_asked: KernelAsked | None = None,
    ) -> None:
        self.path = path
        self.role = role
        self.every = every
        self.defaults = defaults
        self.clock = clock
        self.note: str | None = None  # why recording is paused, or the store's last error
        self.paused = False
        self.flushes = 0
        self.store: Store | None = None
        self._events = EventWatch(exits=shared() if exits else None, asked=kernel_asked)
        self._lock = threading.Lock()
        self._cols: dict[str, tuple[list[float], list[float]]] = {}
        self._flushed: dict[str, int] = {}  # per series, points already in a recent row
        self._points = 0  # samples kept since the last closed block
        self._pending: list[Event] = []
        self._last_kept = -float("inf")
        self._paused_since: float | None = None
        self._next_maintenance = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()  # a flush is wanted before the next timed one
        self._avail_flushed: dict[str, float] = {}  # per path, free bytes at the last flush
        self._avail_now: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._life = threading.Lock()  # start and close hand the thread over under it

    # -- the sampler's side ----------------------------------------------------------
    def __call__(self, sample: Sample, values: bool = True) -> None:
        """Keep this sample's values when it is time (and ``values``), its events always.
        While recording is paused or failing, the sample carries why (``notes["record"]``),
        for the surfaces that show notes after this subscriber ran."""
        if self.note is not None:
            sample.notes["record"] = self.note
        try:
            events = self._events.observe(sample)
        except Exception:  # never into the sampler
            log.debug("trainwatch: events of a sample failed", exc_info=True)
            events = []
        every = self.every() if callable(self.every) else self.every
        keep = values and sample.t - self._last_kept >= every * 0.9
        cap = self.defaults.record_buffer_points
        with self._lock:
            self._pending.extend(events)
            del self._pending[: max(0, len(self._pending) - cap)]
            if not keep:
                return
            if self._falling(sample) or any(_fill_raised(e) for e in events):
                self._wake.set()
            self._last_kept = sample.t
            self._points += 1
            for key, value in flatten(sample):
                ts, vs = self._cols.setdefault(key_to_str(key), ([], []))
                if ts and ts[-1] >= sample.t:
                    continue
                ts.append(sample.t)
                vs.append(value)
                if len(ts) > cap:  # paused for long: the oldest go, memory stays bounded
                    del ts[0], vs[0]
                    self._flushed[key_to_str(key)] = max(
                        0, self._flushed.get(key_to_str(key), 0) - 1
                    )

    @property
    def flush_wanted(self) -> bool:
        """Whether the thread is asked to flush before its next timed flush."""
        return self._wake.is_set()

    def _falling(self, sample: Sample) -> bool:
        """Free space of a watched path fell by more than ``record_hurry_drop_share`` of
        what it was at the last flush (the first reading stands for it before one)."""
        share = self.defaults.record_hurry_drop_share
        self._avail_now = {
            path: float(p.avail_bytes)
            for path, p in sample.paths.items()
            if p.avail_bytes is not None
        }
        falling = False
        for path, avail in self._avail_now.items():
            base = self._avail_flushed.setdefault(path, avail)
            falling = falling or base - avail > share * base
        return falling

    def add_event(self, event: Event) -> None:
        """An event from elsewhere (a notification sent): written with the next flush."""
        with self._lock:
            self._pending.append(event)
            del self._pending[: max(0, len(self._pending) - self.defaults.record_buffer_points)]

    def notified(self, fmt: str) -> Callable[[Any], None]:
        """A Notifier's ``on_sent``: each message delivered becomes a ``notification-sent``
        event (duck-typed: core imports nothing from advice)."""

        def sent(msg: Any) -> None:
            alert = msg.alert
            self.add_event(
                Event(
                    time.time(),
                    "notification-sent",
                    alert.subject,
                    f"{alert.code} {msg.state}: sent to {fmt}",
                    {"code": alert.code, "state": msg.state, "format": fmt},
                )
            )

        return sent

    # -- the recorder's thread -------------------------------------------------------
    def start(self) -> Recorder:
        with self._life:  # (close on another thread takes the thread only once it runs)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="trainwatch-recorder", daemon=True
                )
                self._thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread after a last flush; close the store."""
        self._stop.set()
        self._wake.set()
        self._events.close()
        with self._life:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
        else:
            self.flush()
        if self.store is not None:
            self.store.close()
            self.store = None

    def _run(self) -> None:
        while True:
            self._wake.wait(self.defaults.record_flush_s)
            if self._stop.is_set():
                break
            self.flush()
        self.flush()

    def flush(self) -> bool:
        """Write what came since the last flush; False when paused or the store failed."""
        self._wake.clear()  # what asked for this flush is in it
        try:
            return self._flush()
        except Exception as exc:  # an error is a note, never a crash of the thread
            self._set_note(f"recording failed: {exc}")
            log.warning("trainwatch: recording to %s failed: %s", self.path, exc)
            return False

    def _flush(self) -> bool:
        with self._lock:
            idle = not self._pending and not self._cols and self._paused_since is None
        if idle and self.store is None:
            return True  # nothing to write yet: no file is made for nothing
        if not self._room():
            return False
        store = self._open()
        if store is None:
            return False
        with self._lock:
            events, self._pending = self._pending, []
            news = {
                k: (ts[self._flushed.get(k, 0) :], vs[self._flushed.get(k, 0) :])
                for k, (ts, vs) in self._cols.items()
                if len(ts) > self._flushed.get(k, 0)
            }
            full = self._points >= self.defaults.record_block_points
            whole = {k: (list(ts), list(vs)) for k, (ts, vs) in self._cols.items()} if full else {}
            sizes = {k: len(ts) for k, (ts, _) in self._cols.items()}
            avail = dict(self._avail_now)
        try:
            if self._paused_since is not None:
                events.insert(0, self._resumed())
            store.add_events(events)
            events = []  # committed: a failure of the values below must not queue them again
            if full:
                store.close_blocks(whole)
            elif news:
                ends = [ts[-1] for ts, _ in news.values()]
                store.write_recent(news, min(ts[0] for ts, _ in news.values()), max(ends))
        except sqlite3.OperationalError as exc:
            with self._lock:
                self._pending[:0] = events
            if "full" in str(exc) or "disk I/O" in str(exc):
                self._pause(f"recording paused: the disk of {self.path} is full ({exc})")
                return False
            raise
        with self._lock:
            if full:
                for k, n in sizes.items():
                    ts, vs = self._cols[k]
                    del ts[:n], vs[:n]
                self._cols = {k: c for k, c in self._cols.items() if c[0]}
                self._flushed = {}
                self._points = 0
            else:
                self._flushed.update(sizes)
            self._avail_flushed = avail
        self.flushes += 1
        self._set_note(None)
        self._maintain(store)
        return True

    def _room(self) -> bool:
        """Enough free space on the store's filesystem (pause with a note when not)."""
        directory = os.path.dirname(self.path)
        try:
            st = os.statvfs(directory if os.path.isdir(directory) else "/")
        except OSError as exc:
            self._set_note(f"recording paused: {directory}: {exc.strerror}")
            return False
        free = st.f_bavail * st.f_frsize
        floor = self.defaults.record_min_free_bytes
        if free < floor:
            self._pause(
                f"recording paused: {free / 2**20:.0f} MiB free on the disk of "
                f"{directory}, under the {floor / 2**20:.0f} MiB it leaves free"
            )
            return False
        return True

    def _pause(self, why: str) -> None:
        if self._paused_since is None:
            self._paused_since = self.clock()
            log.warning("trainwatch: %s", why)
        self.paused = True
        self._set_note(why)

    def _resumed(self) -> Event:
        since, self._paused_since = self._paused_since or self.clock(), None
        self.paused = False
        return Event(
            self.clock(),
            "recording-resumed",
            self.path,
            f"recording resumed after a pause of {self.clock() - since:.0f} s "
            f"(too little free space); points kept in memory meanwhile were written",
            {"paused_at": since},
        )

    def _set_note(self, note: str | None) -> None:
        self.note = note

    def _open(self) -> Store | None:
        if self.store is not None:
            return self.store
        try:
            store = Store(self.path, role=self.role, defaults=self.defaults)
            store.register()
        except (StoreError, sqlite3.Error, OSError) as exc:
            self._set_note(f"recording off: {exc}")
            return None
        for note in store.notes:
            log.warning("trainwatch: %s", note)
        self.store = store
        return store

    def _maintain(self, store: Store) -> None:
        now = self.clock()
        if now < self._next_maintenance:
            return
        self._next_maintenance = now + self.defaults.record_maintain_every_s
        try:
            maintain(store, now)
        except sqlite3.Error as exc:
            log.debug("trainwatch: history maintenance failed: %s", exc)


def _fill_raised(event: Event) -> bool:
    """A ``disk-filling`` or ``disk-almost-full`` raised (an event of core.record.events)."""
    return event.kind == "warning-raised" and event.data.get("code") in FILL_CODES
