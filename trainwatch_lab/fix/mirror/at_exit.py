"""What the mirror's final sync must see at exit: the files the script left open, and a
SIGTERM (a scheduler's or Jupyter's stop) that would otherwise end the process before any
copy.

The interpreter flushes file objects nobody closed (``open(...)`` kept in a global, a csv
writer's file) only while it tears itself down, after the atexit handlers: the final sync
would copy them empty. So the final sync flushes, first, every open file object of this
process under a mirror's local directory. SIGTERM's default ends the process at once, with
no atexit at all: while a mirror runs, SIGTERM ends it like a normal exit instead (a
SystemExit with the status a shell shows for SIGTERM, 143), or, when the program had a
handler of its own, a bounded sync runs and that handler is called after it: the program
may well go on (Lightning and SLURM handlers save last.ckpt after SIGTERM), so the mirrors
stay open and registered, and atexit runs the final sync and closes them. The mirrors of
the process are registered here, for that final sync and for the status surfaces.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

log = logging.getLogger(__name__)

_FILE_TYPES = (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)
_state: dict[str, Any] = {"previous": None, "on_term": None}


def flush_open_files(directories: Iterable[str]) -> int:
    """Flush this process's open file objects under ``directories``; how many were flushed.
    Walks the objects the garbage collector tracks: once, at exit."""
    roots = tuple(os.path.join(d, "") for d in directories)
    if not roots:
        return 0
    flushed = 0
    for obj in gc.get_objects():
        if not isinstance(obj, _FILE_TYPES):
            continue
        with contextlib.suppress(ValueError, OSError, AttributeError):
            name = obj.name
            if obj.closed or not isinstance(name, str) or not obj.writable():
                continue
            if os.path.abspath(name).startswith(roots):
                obj.flush()
                flushed += 1
    return flushed


def _on_sigterm(signum: int, frame: Any) -> None:
    previous, on_term = _state["previous"], _state["on_term"]
    if callable(previous):
        if on_term is not None:
            on_term()  # a bounded sync: the program's own handler decides what follows
        previous(signum, frame)
        return
    raise SystemExit(128 + signum)  # a normal exit: atexit runs the final sync


def install_sigterm(on_term: Callable[[], None]) -> None:
    """Make SIGTERM end the process through the final sync (main thread only: Python runs
    signal handlers there; a process that ignores SIGTERM is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm or current == signal.SIG_IGN or current is None:
        return
    _state["previous"], _state["on_term"] = current, on_term
    signal.signal(signal.SIGTERM, _on_sigterm)


def uninstall_sigterm() -> None:
    """Put the earlier SIGTERM handler back (the last mirror closed), unless someone else
    installed theirs since."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _state["previous"] or signal.SIG_DFL)
    _state["previous"] = _state["on_term"] = None


class Closable(Protocol):
    local: str
    exit_timeout: float

    def close(self, timeout: float | None = None) -> bool: ...

    def sync(self, timeout: float | None = None) -> bool: ...


_MIRRORS: list[Any] = []
_MIRRORS_LOCK = threading.Lock()


def register(m: Closable) -> None:
    with _MIRRORS_LOCK:
        _MIRRORS.append(m)
    install_sigterm(sync_all)


def unregister(m: Closable) -> None:
    with _MIRRORS_LOCK:
        if m in _MIRRORS:
            _MIRRORS.remove(m)
        last = not _MIRRORS
    if last:
        uninstall_sigterm()


def registered() -> list[Any]:
    with _MIRRORS_LOCK:
        return list(_MIRRORS)


def _bounded(action: Callable[[Any, float], object]) -> None:
    """``action(mirror, seconds left)`` for each mirror, all within the longest
    ``exit_timeout``, after flushing the files left open under them."""
    mirrors = registered()
    if not mirrors:
        return
    flush_open_files(m.local for m in mirrors)
    deadline = time.monotonic() + max(m.exit_timeout for m in mirrors)
    for m in mirrors:
        action(m, max(0.0, deadline - time.monotonic()))


def sync_all() -> None:
    """SIGTERM with the program's own handler: copy what is there now (bounded), leaving
    the mirrors running for what the program still writes before it exits."""
    _bounded(lambda m, left: m.sync(timeout=left))


@atexit.register
def close_all() -> None:
    """One bounded final sync for all mirrors, then they stop (registered after
    core.guard.guard's own atexit handler, so it runs first, while the helpers are still
    there)."""
    _bounded(lambda m, left: m.close(timeout=left))
