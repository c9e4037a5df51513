"""Checkpoints that do not stop the step: ``save_checkpoint(..., background=True)``.

A 256 MiB save to a busy or network disk holds the training loop for seconds per save. Here
the same save (space check, temporary name, fsync, rename: ``checkpoint.save_checkpoint``)
runs on its own thread and the caller gets a ``SaveHandle`` to wait on. What is written is
what the caller's ``save`` writes: hand it a state the loop does not change meanwhile (a
copy, e.g. ``{k: v.detach().cpu().clone() for k, v in model.state_dict().items()}``).

At most one save is in flight per process, foreground or background: two saves of a series
racing each other would each count the other's file when they make room and keep N. A
second save waits (``if_busy="wait"``) or raises ``SaveInFlight`` at once (``"refuse"``).
``checkpoint_status()`` says what is in flight and how long the last save took, for a
dashboard or a log line; it reads a snapshot under a lock, never the disk.

The thread is not a daemon: the interpreter waits for a save in flight before it exits, so
the end of a script does not cut the last checkpoint off half-written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..core.paths import printable

log = logging.getLogger(__name__)

IF_BUSY = ("wait", "refuse")
_slot = threading.Lock()  # held while a save is in flight (released by the thread that saved)
_state_lock = threading.Lock()


class SaveInFlight(RuntimeError):
    """Another save is being written and the caller asked not to wait (``if_busy="refuse"``)."""


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


def claim(if_busy: str) -> None:
    """Take the one save slot, waiting or refusing as the caller chose."""
    if if_busy not in IF_BUSY:
        raise ValueError(f"if_busy must be 'wait' or 'refuse', not {if_busy!r}")
    if _slot.acquire(blocking=False):
        return
    if if_busy == "refuse":
        busy = checkpoint_status()
        raise SaveInFlight(
            f"a checkpoint save to {printable(busy.path or '?')} is in flight since "
            f"{time.time() - (busy.started_at or time.time()):.1f} s; wait for its handle "
            "or pass if_busy='wait'"
        )
    _slot.acquire()


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

    thread = threading.Thread(target=work, name="trainwatch-save", daemon=False)
    try:
        thread.start()
    except BaseException:
        _end(path, began, RuntimeError("the save thread did not start"))
        raise
    return handle
