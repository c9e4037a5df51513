"""Checkpoints that do not stop the step: ``save_checkpoint(..., background=True)``.

A 256 MiB save to a busy or network disk holds the training loop for seconds per save. Here
the same save (space check, temporary name, fsync, rename: ``checkpoint.save.save_checkpoint``)
runs on its own thread and the caller gets a ``SaveHandle`` to wait on. What is written is
what the caller's ``save`` writes: hand it a state the loop does not change meanwhile (a
copy, e.g. ``{k: v.detach().cpu().clone() for k, v in model.state_dict().items()}``).

At most one save is in flight per process, foreground or background: two saves of a series
racing each other would each count the other's file when they make room and keep N. A
second save waits (``if_busy="wait"``), but never longer than ``DEFAULTS.save_busy_wait_s``:
a save stuck on a share that stopped answering must not stop the training loop with it.
Past that, a background save is skipped (one logged line; its handle says so) and a
foreground one raises ``SaveInFlight``; ``"skip"`` skips at once, ``"refuse"`` raises at
once.
``checkpoint_status()`` says what is in flight and how long the last save took, for a
dashboard or a log line; it reads a snapshot under a lock, never the disk.

The thread is a daemon, and at exit the interpreter waits for a save in flight at most
``DEFAULTS.save_exit_wait_s`` (atexit): long enough for a save that is landing, and bounded
when it writes to a share that hangs; then one line says which save did not land (the
earlier saves are intact: nothing is renamed over them until a save is whole).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ...core.defaults import DEFAULTS
from ...core.paths.names import printable

log = logging.getLogger(__name__)

IF_BUSY = ("wait", "refuse", "skip")
_slot = threading.Lock()  # held while a save is in flight (released by the thread that saved)
_state_lock = threading.Lock()


class SaveInFlight(RuntimeError):
    """Another save is being written and the caller asked not to wait (``if_busy="refuse"``),
    or it did not finish within ``DEFAULTS.save_busy_wait_s``."""


class SaveSkipped(SaveInFlight):
    """A background save that did not run: another one was still in flight (the handle's
    error; the training goes on)."""


@dataclass
class SaveStatus:
    """What ``checkpoint_status()`` returns; times are ``time.time()`` seconds."""

    in_flight: bool = False
    path: str | None = None  # the save in flight
    started_at: float | None = None
    background: bool = False
    last_path: str | None = None
    last_duration_s: float | None = None  # the whole save: space check to rename
    last_finished_at: float | None = None
    last_ok: bool | None = None
    last_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_status = SaveStatus()


def checkpoint_status() -> SaveStatus:
    """A copy of the save in flight and the last save's outcome and duration."""
    with _state_lock:
        return SaveStatus(**asdict(_status))


class SaveHandle:
    """A background save: ``wait()`` returns the path once it landed, or raises its error."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.started_at = time.time()
        self.duration_s: float | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> str:
        """Block until the save landed (its path) or failed (its exception, re-raised);
        TimeoutError after ``timeout`` seconds, the save still running."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the save to {printable(self.path)} is still running")
        if self.error is not None:
            raise self.error
        return self.path

    def __repr__(self) -> str:
        state = "running" if not self.done() else ("failed" if self.error else "done")
        return f"<SaveHandle {printable(self.path)} {state}>"


def _busy_text(dst: str) -> str:
    busy = checkpoint_status()
    age = time.time() - (busy.started_at or time.time())
    return (
        f"{printable(dst)} not saved: the save to {printable(busy.path or '?')} is still in "
        f"flight after {age:.0f} s (a share that does not answer?)"
    )


def claim(if_busy: str, dst: str = "", background: bool = False) -> bool:
    """Take the one save slot, waiting (at most ``DEFAULTS.save_busy_wait_s``), skipping or
    refusing as the caller chose. False: a background save to skip (``skipped``)."""
    if if_busy not in IF_BUSY:
        raise ValueError(f"if_busy must be 'wait', 'skip' or 'refuse', not {if_busy!r}")
    if _slot.acquire(blocking=False):
        return True
    if if_busy == "wait" and _slot.acquire(timeout=DEFAULTS.save_busy_wait_s):
        return True
    if background and if_busy != "refuse":
        return False
    hint = "wait for its handle or pass if_busy='wait'" if if_busy == "refuse" else "skipped"
    raise SaveInFlight(f"{_busy_text(dst)}; {hint}")


def skipped(dst: str) -> SaveHandle:
    """The handle of a background save that did not run: done, its error ``SaveSkipped``,
    said in one logged line; the training goes on."""
    handle = SaveHandle(dst)
    handle.error = SaveSkipped(f"{_busy_text(dst)}; skipped, the training goes on")
    handle.duration_s = 0.0
    handle._done.set()
    log.warning("trainwatch: checkpoint %s", handle.error)
    return handle


def _begin(path: str, background: bool) -> float:
    with _state_lock:
        _status.in_flight, _status.path, _status.background = True, path, background
        _status.started_at = time.time()
    return time.perf_counter()


def _end(path: str, began: float, error: BaseException | None) -> float:
    took = time.perf_counter() - began
    with _state_lock:
        _status.in_flight, _status.path, _status.started_at = False, None, None
        _status.last_path, _status.last_duration_s = path, took
        _status.last_finished_at, _status.last_ok = time.time(), error is None
        _status.last_error = None if error is None else f"{type(error).__name__}: {error}"
    _slot.release()
    return took


def run_claimed(save_now: Callable[[], str], path: str) -> str:
    """A foreground save in the slot (already claimed), timed like a background one."""
    began = _begin(path, background=False)
    error: BaseException | None = None
    try:
        return save_now()
    except BaseException as exc:
        error = exc
        raise
    finally:
        _end(path, began, error)


def start_claimed(save_now: Callable[[], str], path: str) -> SaveHandle:
    """Run ``save_now`` on a new thread in the slot (already claimed); returns its handle."""
    handle = SaveHandle(path)
    began = _begin(path, background=True)

    def work() -> None:
        try:
            handle.path = save_now()
        except BaseException as exc:  # kept for wait(); logged if nobody looks
            handle.error = exc
        finally:
            handle.duration_s = _end(handle.path, began, handle.error)
            handle._done.set()
        if handle.error is not None:
            log.warning(
                "trainwatch: background save to %s failed: %s",
                printable(handle.path),
                handle.error,
            )

    thread = threading.Thread(target=work, name="trainwatch-save", daemon=True)
    _in_flight[0] = handle
    try:
        thread.start()
    except BaseException:
        _end(path, began, RuntimeError("the save thread did not start"))
        raise
    return handle


_in_flight: list[SaveHandle | None] = [None]  # the latest background save


@atexit.register
def _wait_at_exit() -> None:
    """Exit waits for a background save in flight, at most ``DEFAULTS.save_exit_wait_s``
    (registered after core.guard.guard's handler, so it runs first, while the helpers are there)."""
    handle = _in_flight[0]
    if handle is None or handle.done():
        return
    if not handle._done.wait(DEFAULTS.save_exit_wait_s):
        log.warning(
            "trainwatch: exiting without the save to %s: it did not land within %.0f s (a "
            "share that does not answer?); the earlier saves are intact",
            printable(handle.path),
            DEFAULTS.save_exit_wait_s,
        )
