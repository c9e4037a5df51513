"""Callbacks that compute too long on an asyncio loop, timed in the loop thread's CPU time.

Wall time on a loaded CI machine includes every moment the thread waited for a core; CPU time
(``time.thread_time``) is what the callback itself cost, so a threshold on it holds on a busy
machine and still catches a fold, a decode or a file walk left on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator

import trainwatch_lab

OURS = os.path.dirname(trainwatch_lab.__file__) + os.sep  # the package, wherever checked out


def describe(handle: asyncio.Handle) -> str:
    """What a handle runs, as asyncio's debug log names it: a task with its coroutine, file
    and line, else the callback."""
    owner = getattr(handle._callback, "__self__", None)
    return repr(owner) if isinstance(owner, asyncio.Task) else repr(handle)


def ours(text: str) -> bool:
    """Whether a described callback runs our code: its task's coroutine or its function is in
    trainwatch_lab (not merely created there: asyncio's own ``_release_waiter`` of a
    ``wait_for`` we started is asyncio's)."""
    return OURS in text.split(" created at ", 1)[0]


@contextlib.contextmanager
def callbacks_over(threshold_s: float) -> Iterator[list[tuple[float, str]]]:
    """Collect ``(cpu seconds, description)`` of every callback run in this thread that
    computed longer than ``threshold_s``."""
    seen: list[tuple[float, str]] = []
    loop_thread = threading.get_ident()
    run = asyncio.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        if threading.get_ident() != loop_thread:
            return run(handle)
        start = time.thread_time()
        try:
            return run(handle)
        finally:
            spent = time.thread_time() - start
            if spent > threshold_s:
                seen.append((spent, describe(handle)))

    asyncio.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        asyncio.Handle._run = run  # type: ignore[method-assign]


# the worst callback any server test's loop ran, for the line after the run
# (tests/support/summaries.py prints it, after adding up pytest-xdist workers' with merge_worst)
WORST: list = [0.0, ""]


def note_worst(seen: list[tuple[float, str]]) -> None:
    for spent, text in seen:
        merge_worst([spent, text])


def merge_worst(other: list) -> None:
    if other[0] > WORST[0]:
        WORST[:] = list(other)


def worst_line() -> str:
    """The worst callback's line, or "" if no test timed one."""
    if not WORST[0]:
        return ""
    return (
        f"worst event-loop callback (loop thread CPU): {WORST[0] * 1000:.0f} ms: {WORST[1][:300]}"
    )
