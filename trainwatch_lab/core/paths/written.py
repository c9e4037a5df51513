"""What was written under a directory since a moment: the files modified since then, their
count and bytes (``%%trainwatch``'s "written" per watched path).

A filesystem's block-device counters miss tmpfs and network mounts (no block device) and
count every process on a shared disk; the growth of used space misses a checkpoint that
replaced one of the same size. The files themselves say what a cell wrote where: each
regular file whose mtime falls after the cell began, at its current size. Bounded like the
checkpoint scan (entries, depth, a time budget; symlinks and mount points below never
entered), and run in that scan's helper lane, so a dead mount costs its timeout once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Container
from dataclasses import dataclass

from ..storage.space import MAX_SCAN_DEPTH, MAX_SCAN_ENTRIES, _regular, _Walk


def _coarse_tick() -> float:
    """Linux stamps a file's mtime from the coarse clock, updated once a jiffy: a file
    written just after ``since`` (read from the fine clock) can carry an mtime up to one
    tick before it."""
    try:
        return time.clock_getres(time.CLOCK_REALTIME_COARSE)
    except (AttributeError, OSError):
        return 0.01


COARSE_TICK_S = _coarse_tick()


@dataclass(frozen=True, slots=True)
class Written:
    """Files modified under a directory since a moment. ``complete``: the scan saw every
    entry (False: it stopped at its entry or time budget; the numbers are a lower bound)."""

    files: int
    bytes: int
    complete: bool = True


def written_since(
    directory: str,
    since: float,
    max_entries: int = MAX_SCAN_ENTRIES,
    budget_s: float | None = None,
    skip_dirs: Container[str] = (),
) -> Written:
    """Regular files under ``directory`` (``MAX_SCAN_DEPTH`` levels) with mtime >= ``since``
    (less one tick of the coarse clock that stamps mtimes)."""
    since -= COARSE_TICK_S
    walk = _Walk(max_entries, budget_s, skip_dirs)
    files = size = 0
    stack = [(0, directory)]
    while stack and not walk.stopped():
        depth, path = stack.pop()
        for entry in walk.listing(path):
            st = _regular(entry)
            if st is not None:
                if st.st_mtime >= since:
                    files += 1
                    size += st.st_size
                continue
            if depth < MAX_SCAN_DEPTH and _plain_dir(entry) and entry.path not in skip_dirs:
                stack.append((depth + 1, entry.path))
    return Written(files, size, complete=not walk.stopped() and not stack)


def _plain_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
