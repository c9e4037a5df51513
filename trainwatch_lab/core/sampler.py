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


class Sampler:
    """Runs sources every ``interval`` seconds on a daemon thread; start/stop are idempotent."""

    def __init__(
        self,
        sources: Sequence[Source],
        interval: float = DEFAULTS.interval_s,
        history: History | None = None,
        evaluate: Evaluate | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.sources: list[Source] = list(sources)
        self.interval = float(interval)
        self.history = history if history is not None else History()
        self.evaluate = evaluate
        self._subscribers: list[Subscriber] = []
        self._lock = threading.RLock()
        # held while the thread should keep ticking; stop() releases it, which ends the
        # thread's wait at once (a bare lock: Event.wait builds a Condition every tick)
        self._keep_going: threading.Lock | None = None
        self._thread: threading.Thread | None = None
        self._reported: set[tuple[str, str]] = set()
        self.ticks = 0

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
            if keep_going is not None:
                keep_going.release()
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
        return self.history.latest

    def find_source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)

    # -- the tick --------------------------------------------------------------------
    def tick(self) -> Sample:
        """Take one sample synchronously (the thread calls this; so may tests and the CLI)."""
        sample = Sample(t=time.time())
        for source in list(self.sources):
            try:
                source.collect(sample)
            except Exception as exc:  # a broken source must not stop the others
                self._note(sample, source.name, exc)
        self.history.append(sample)
        if self.evaluate is not None:
            try:
                sample.warnings = self.evaluate(sample, self.history)
            except Exception as exc:
                self._note(sample, "advice", exc)
        self.ticks += 1
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(sample)
            except Exception:
                log.exception("trainwatch subscriber %r failed", callback)
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
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # we fell behind (slow source): skip, don't burst
                next_at = time.monotonic()
                delay = 0.0
            if keep_going.acquire(timeout=delay):  # released: stop() was called
                break
