"""Free space, how fast it shrinks, and the checkpoints that eat it.

Pure functions over data the caller already has (a statvfs result, a series of readings) plus
one bounded directory scan; the scan touches the filesystem, so callers run it inside the
mount guard's worker (core.paths does), never on the kernel or event-loop thread.
"""

from __future__ import annotations

import itertools
import operator
import os
import statistics
import time
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

from .defaults import CHECKPOINT_SUFFIXES
from .model import CheckpointInfo

MAX_SCAN_ENTRIES = 10_000
CADENCE_MAX_CV = 0.5  # spacing stdev / mean above this: saves are not regular


def space_fields(st: os.statvfs_result) -> dict[str, int]:
    """PathState's space fields from statvfs. ``avail`` (f_bavail) is what a non-root
    training job may still write; ``free`` includes the root-reserved blocks."""
    return {
        "total_bytes": st.f_blocks * st.f_frsize,
        "free_bytes": st.f_bfree * st.f_frsize,
        "avail_bytes": st.f_bavail * st.f_frsize,
        "inodes_total": st.f_files,
        "inodes_free": st.f_ffree,
    }


@dataclass(frozen=True, slots=True)
class FillEstimate:
    """Least-squares trend of available space. ``rate_bps`` > 0 means it is shrinking."""

    rate_bps: float
    seconds_to_full: float | None
    points: int
    span_s: float = 0.0  # time between the first and the last point of the fit


def fill_estimate(times: Sequence[float], avail_bytes: Sequence[float]) -> FillEstimate | None:
    """Fit avail = a + b*t by ordinary least squares; the fill rate is -b.

    A fit (not first-vs-last) so one checkpoint landing or being deleted does not swing the
    prediction. Time to full extrapolates from the latest reading; ``None`` when not shrinking.
    """
    n = min(len(times), len(avail_bytes))
    if n < 2:
        return None
    # C-level passes (map, sum, max): the detectors fit every filesystem every tick
    ts = list(map(float, times[:n]))
    ys = list(map(float, avail_bytes[:n]))
    t_mean = sum(ts) / n  # centre first: epoch seconds squared lose precision
    y_mean = sum(ys) / n
    dt = list(map(operator.sub, ts, itertools.repeat(t_mean, n)))
    dy = list(map(operator.sub, ys, itertools.repeat(y_mean, n)))
    sxx = sum(map(operator.mul, dt, dt))
    if sxx <= 0:
        return None
    rate = -sum(map(operator.mul, dt, dy)) / sxx
    newest, oldest = max(ts), min(ts)
    latest = ys[ts.index(newest)]
    seconds = max(latest, 0.0) / rate if rate > 0 else None
    return FillEstimate(rate_bps=rate, seconds_to_full=seconds, points=n, span_s=newest - oldest)


def _is_checkpoint(name: str, suffixes: tuple[str, ...]) -> bool:
    return name.lower().endswith(suffixes) and not name.startswith(".")


def _cadence(save_times: Iterable[float]) -> float | None:
    """Median spacing of saves, only when there are >= 3 and they come regularly."""
    times = sorted(save_times)
    if len(times) < 3:
        return None
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = statistics.fmean(gaps)
    if mean <= 0 or statistics.pstdev(gaps) / mean > CADENCE_MAX_CV:
        return None
    return statistics.median(gaps)


def scan_checkpoints(
    directory: str,
    suffixes: Sequence[str] = CHECKPOINT_SUFFIXES,
    max_entries: int = MAX_SCAN_ENTRIES,
    budget_s: float | None = None,
    skip_dirs: Container[str] = (),
) -> CheckpointInfo | None:
    """Find checkpoint saves in ``directory`` and its immediate subdirectories.

    A save is either a checkpoint file in the directory itself (Lightning's
    ``epoch=3-step=500.ckpt``) or a subdirectory holding checkpoint files (Hugging Face's
    ``checkpoint-500/``); a subdirectory save weighs all regular files directly in it and is
    dated by its newest file. Symlinks are never followed (no loops, no double counting of
    ``last.ckpt`` links); at most ``max_entries`` entries are looked at, and after
    ``budget_s`` seconds the scan stops and reports what it saw (a big directory on a slow
    share must not hold its helper for long). Subdirectories in ``skip_dirs`` (mount points)
    are not entered.
    """
    sfx = tuple(s.lower() for s in suffixes)
    saves: list[tuple[float, int, str]] = []  # (mtime, bytes, path)
    seen = 0
    deadline = None if budget_s is None else time.monotonic() + budget_s

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def entries(path: str) -> list[os.DirEntry[str]]:
        nonlocal seen
        out: list[os.DirEntry[str]] = []
        try:
            with os.scandir(path) as it:
                for entry in it:
                    if seen >= max_entries or out_of_time():
                        break
                    seen += 1
                    out.append(entry)
        except OSError:
            pass
        return out

    def file_stat(entry: os.DirEntry[str]) -> os.stat_result | None:
        try:
            if entry.is_file(follow_symlinks=False):
                return entry.stat(follow_symlinks=False)
        except OSError:
            pass
        return None

    subdirs: list[os.DirEntry[str]] = []
    for entry in entries(directory):
        if out_of_time():
            break
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.path not in skip_dirs:
                    subdirs.append(entry)
                continue
        except OSError:
            continue
        if _is_checkpoint(entry.name, sfx) and (st := file_stat(entry)) is not None:
            saves.append((st.st_mtime, st.st_size, entry.path))
    for sub in subdirs:
        if out_of_time():
            break
        total, newest, has_checkpoint = 0, None, False
        for entry in entries(sub.path):
            st = file_stat(entry)
            if st is None:
                continue
            total += st.st_size
            newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
            has_checkpoint = has_checkpoint or _is_checkpoint(entry.name, sfx)
        if has_checkpoint and newest is not None:
            saves.append((newest, total, sub.path))
    if not saves:
        return None
    mtime, size, path = max(saves)
    return CheckpointInfo(
        count=len(saves),
        newest_path=path,
        newest_bytes=size,
        newest_mtime=mtime,
        cadence_s=_cadence(t for t, _, _ in saves),
    )
