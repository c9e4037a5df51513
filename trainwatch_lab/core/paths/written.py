"""What was written under a directory since a moment: the files modified since then, their
count and bytes (``%%trainwatch``'s "written" per watched path).

A filesystem's block-device counters miss tmpfs and network mounts (no block device) and
count every process on a shared disk; the growth of used space misses a checkpoint that
replaced one of the same size. The files themselves say what a cell wrote where: each
regular file whose mtime falls after the cell began, counted by what it grew since the
listing taken as the cell began (``file_sizes``: a log the cell appended 1 KiB to counts
1 KiB, not its 29 KiB), whole when it is new, another file (inode) or shorter. Bounded like the
checkpoint scan (entries, depth, a time budget; symlinks and mount points below never
entered), and run in that scan's helper lane, so a dead mount costs its timeout once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Container, Mapping
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


def _files(
    directory: str, max_entries: int, budget_s: float | None, skip_dirs: Container[str]
) -> tuple[list[tuple[str, os.stat_result]], bool]:
    """(path, stat) of the regular files under ``directory`` (``MAX_SCAN_DEPTH`` levels), and
    whether the listing saw every entry."""
    walk = _Walk(max_entries, budget_s, skip_dirs)
    found: list[tuple[str, os.stat_result]] = []
    stack = [(0, directory)]
    while stack and not walk.stopped():
        depth, path = stack.pop()
        for entry in walk.listing(path):
            st = _regular(entry)
            if st is not None:
                found.append((entry.path, st))
                continue
            if depth < MAX_SCAN_DEPTH and _plain_dir(entry) and entry.path not in skip_dirs:
                stack.append((depth + 1, entry.path))
    return found, not walk.stopped() and not stack


def file_sizes(
    directory: str,
    max_entries: int = MAX_SCAN_ENTRIES,
    budget_s: float | None = None,
    skip_dirs: Container[str] = (),
) -> dict[str, list[int]]:
    """Path -> [inode, size] of the regular files under ``directory``: the listing a cell's
    writes are measured from (``written_since``'s ``before``)."""
    found, _ = _files(directory, max_entries, budget_s, skip_dirs)
    return {path: [st.st_ino, st.st_size] for path, st in found}


def written_since(
    directory: str,
    since: float,
    max_entries: int = MAX_SCAN_ENTRIES,
    budget_s: float | None = None,
    skip_dirs: Container[str] = (),
    before: Mapping[str, list[int]] | None = None,
) -> Written:
    """Regular files under ``directory`` with mtime >= ``since`` (less one tick of the coarse
    clock that stamps mtimes), each counted by what it grew past its size in ``before``
    (the same inode, not shorter), else whole."""
    since -= COARSE_TICK_S
    found, complete = _files(directory, max_entries, budget_s, skip_dirs)
    files = size = 0
    for path, st in found:
        if st.st_mtime < since:
            continue
        files += 1
        ino, old = (before or {}).get(path, (None, 0))
        grew = ino == st.st_ino and st.st_size >= old
        size += st.st_size - old if grew else st.st_size
    return Written(files, size, complete=complete)


def _plain_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
