"""One background thread that asks every source for its part of a Sample, once per interval.

Surfaces never sample themselves: they subscribe. A source that raises never stops the
sampler; its error is logged once and carried in ``Sample.notes`` as data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .defaults import DEFAULTS
from .history import History
from .model import Alert, Sample

log = logging.getLogger(__name__)

Subscriber = Callable[[Sample], None]
Evaluate = Callable[[Sample, History], list[Alert]]


@runtime_checkable
class Source(Protocol):
    """Fills its part of a Sample. Sources run in order, so a later one may read an earlier
    one's results (the disk source reads the devices that the paths source resolved)."""

    name: str

    def collect(self, sample: Sample) -> None: ...


# A source may also have ``want_fresh()``: called before a tick that ``tick_now`` asked for,
# so one that relays another sampler's samples (an attached kernel's) waits for a new one.


class _Asked:
    """One ``tick_now`` request: answered by the first tick numbered ``number`` or later."""

    __slots__ = ("done", "number", "sample")

    def __init__(self, number: int) -> None:
        self.number = number
        self.done = threading.Event()
        self.sample: Sample | None = None


class Sampler:
    """Runs sources every ``interval`` seconds on a daemon thread; start/stop are idempotent."""

    def __init__(
        self,
        sources: Sequence[Source],
        interval: float = DEFAULTS.interval_s,
        history: History | None = None,
        evaluate: Evaluate | None = None,
        clock: Callable[[], float] = time.time,
        unprompted_s: float | None = None,
    ) -> None:
        """``interval``: the time between samples, as every view reads it. ``unprompted_s``:
        how long the thread waits for a ``poke`` before it ticks by itself, when samples come
        from elsewhere (an attached kernel's, on its server's ticks); by default ``interval``."""
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.sources: list[Source] = list(sources)
        self.interval = float(interval)
        self._period = float(unprompted_s or interval)
        self.history = history if history is not None else History()
        self.evaluate = evaluate
        self.clock = clock  # a sample's time: tests that tick by hand pass their own
        self._subscribers: list[Subscriber] = []
        self._lock = threading.RLock()
        # held while the thread should keep ticking; stop() releases it, which ends the
        # thread's wait at once (a bare lock: Event.wait builds a Condition every tick)
        self._keep_going: threading.Lock | None = None
        self._thread: threading.Thread | None = None
        self._reported: set[tuple[str, str]] = set()
        self.ticks = 0
        self._begun = 0  # ticks started (a request is answered by one that starts after it)
        self._asked: list[_Asked] = []
        # the tick appended to the history whose warnings are still being evaluated, and the
        # last one that was not: readers of ``latest`` get the second while the first runs
        self._evaluating: Sample | None = None
        self._finished: Sample | None = None
        self._poked = False  # poke(): tick now, nobody waits for it

    # -- lifecycle -------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Sampler:
        with self._lock:
            if self.running:
                return self
            keep_going = self._keep_going = threading.Lock()
            keep_going.acquire()
            self._thread = threading.Thread(
                target=self._run, args=(keep_going,), name="trainwatch-sampler", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            keep_going, self._keep_going = self._keep_going, None
            if keep_going is not None and keep_going.locked():  # (unlocked: woken already)
                keep_going.release()
            asked, self._asked = self._asked, []
        for request in asked:  # no tick will answer them now
            request.done.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self) -> None:
        """Stop and release what sources hold (helper processes, NVML)."""
        self.stop()
        for source in self.sources:
            closer = getattr(source, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:  # closing must never raise into a surface
                    log.debug("closing source %s failed", source.name, exc_info=True)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- subscribers -----------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(sample)`` on the sampler thread after each tick; returns unsubscribe."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    @property
    def latest(self) -> Sample | None:
        """The newest sample whose warnings and headline are made. The tick in progress is
        in the history before the Advisor has judged it (its ``warnings`` still empty): a
        surface reading it then (``%trainwatch status``, a paused dashboard) would say "no
        warnings" while every other view shows them, so it gets the tick before."""
        latest = self.history.latest
        if latest is not None and latest is self._evaluating:
            return self._finished
        return latest

    def find_source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)

    def tick_now(self, timeout: float) -> Sample | None:
        """Have the sampler thread take a sample now, and wait at most ``timeout`` s for it.

        For a surface that needs a reading at a precise moment (the end of a cell): the
        sample starts after this call, so it sees everything done before it, and it is taken
        on the sampler's thread, so the caller waits on an Event, never on a dead mount.
        Returns None when the thread is not running or the sample did not land in time.
        """
        with self._lock:
            keep_going = self._keep_going
            if keep_going is None or not self.running:
                return None
            request = _Asked(self._begun + 1)
            self._asked.append(request)
            if keep_going.locked():  # wake the thread (unlocked: a wake is already pending)
                keep_going.release()
        if not request.done.wait(timeout):
            with self._lock:
                if request in self._asked:
                    self._asked.remove(request)
        return request.sample

    def poke(self) -> None:
        """Tick now, without waiting for it: a source that relays another sampler (an
        attached kernel's) has a new sample, so this sampler ticks in step with that one."""
        with self._lock:
            keep_going = self._keep_going
            if keep_going is None or not self.running:
                return
            self._poked = True
            if keep_going.locked():
                keep_going.release()

    def _answer(self, number: int, sample: Sample) -> None:
        """Hand ``sample`` to the requests made before its tick began."""
        with self._lock:
            ready = [r for r in self._asked if r.number <= number]
            self._asked = [r for r in self._asked if r.number > number]
        for request in ready:
            request.sample = sample
            request.done.set()

    # -- the tick --------------------------------------------------------------------
    def tick(self) -> Sample:
        """Take one sample synchronously (the thread calls this; so may tests and the CLI)."""
        with self._lock:
            self._begun += 1
            number = self._begun
            asked = any(r.number <= number for r in self._asked)
        if asked:  # a surface waits for this tick: a source that can be fresher is told
            for source in self.sources:
                want_fresh = getattr(source, "want_fresh", None)
                if callable(want_fresh):
                    want_fresh()
        sample = Sample(t=self.clock())
        for source in list(self.sources):
            try:
                source.collect(sample)
            except Exception as exc:  # a broken source must not stop the others
                self._note(sample, source.name, exc)
        self._evaluating = sample
        self.history.append(sample)
        if self.evaluate is not None:
            try:
                sample.warnings = self.evaluate(sample, self.history)
            except Exception as exc:
                self._note(sample, "advice", exc)
        self._finished, self._evaluating = sample, None
        self.ticks += 1
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(sample)
            except Exception:
                log.exception("trainwatch subscriber %r failed", callback)
        if self._asked:  # (a request made after this tick began waits for the next one)
            self._answer(number, sample)
        return sample

    def _note(self, sample: Sample, name: str, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        sample.notes[name] = text
        if (name, text) not in self._reported:
            self._reported.add((name, text))
            log.warning("trainwatch source %s failed: %s", name, text)

    def _run(self, keep_going: threading.Lock) -> None:
        next_at = time.monotonic()
        while True:
            self.tick()
            next_at += self._period
            if next_at < time.monotonic():  # we fell behind (slow source): skip, don't burst
                next_at = time.monotonic()
            woke = self._wait(next_at, keep_going)
            if woke is None:
                break
            if woke:  # a tick asked for now; the next one an interval after it
                next_at = time.monotonic()

    def _wait(self, until: float, keep_going: threading.Lock) -> bool | None:
        """Sleep until ``until`` (False), or until tick_now asks (True) or stop() (None).
        A wake whose request the last tick already answered goes back to sleep."""
        while keep_going.acquire(timeout=max(0.0, until - time.monotonic())):
            if self._keep_going is not keep_going:  # stopped (or restarted anew)
                return None
            if self._asked or self._poked:
                self._poked = False
                return True
        return False
