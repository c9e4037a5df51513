"""Will the next checkpoint fit? The one rule, and a watch that answers without waiting.

The next save needs about as much room as the last one (``core.storage.space.scan_checkpoints``
finds it, whatever the framework's layout). ``save_checkpoint`` asks right before it writes
(it is about to touch that disk anyway); a framework callback asks ``SpaceWatch``, which
measures on its own daemon thread through the mount guard, so a checkpoint hook costs a
lock and a comparison and never waits on a share.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.defaults import DEFAULTS
from ..core.guard.guard import MountGuard, MountUnresponsive, WorkerFailed, WorkerUnavailable
from ..core.guard.guard import default_guard as _default_guard
from ..core.paths.look import scan_checkpoints_guarded
from ..core.paths.names import normalise, printable
from ..core.storage.mounts import mount_for_path, read_mounts
from ..core.storage.space import space_fields

log = logging.getLogger(__name__)

SPACE_EVERY_S = 5.0  # a save every few minutes: a reading this old is fresh enough
SPACE_KEY = "{} (space watch)"  # its own guard key: a slow listing never marks the mount stuck


class CheckpointWontFit(OSError):
    """The next save needs more room than is left: raised before anything is written, so
    the saves already on disk stay whole (errno ENOSPC, like the failure it prevents)."""

    def __init__(self, message: str, directory: str, needed: int, available: int) -> None:
        super().__init__(errno.ENOSPC, message)
        self.directory, self.needed, self.available = directory, needed, available
        self.older: list[tuple[str, int]] = []  # earlier saves, oldest first (checkpoint.room)
        self.midway = False  # the disk filled while the save was written (checkpoint.room.filled)

    def __str__(self) -> str:
        return str(self.strerror)


def fmt_size(n: float) -> str:
    """1536 -> '1.5 KiB' (the words of every message here)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - the loop returns


def wont_fit(
    name: str,
    directory: str,
    needed: int,
    available: int,
    last: str | None = None,
    limit: str = "",
) -> CheckpointWontFit | None:
    """The error to raise when a save of about ``needed`` bytes cannot fit, else None
    (``limit``: " under your quota on /data" when a quota, not the disk, leaves less)."""
    if needed <= available:
        return None
    what = f"the last save ({printable(last)}) took" if last else "the save needs about"
    message = (
        f"checkpoint {printable(name)} will not fit in {printable(directory)}: {what} "
        f"{fmt_size(needed)}, {fmt_size(available)} is free{limit}. Nothing was written; the "
        "earlier saves are intact. Free space, keep fewer saves (keep=N, save_top_k, "
        "save_total_limit), save to a disk with more room (fallback=DIR) or let the save "
        "wait for room (on_full='wait')."
    )
    return CheckpointWontFit(message, directory, needed, available)


@dataclass(frozen=True)
class Reading:
    """Free space and the newest save of one directory, when measured (time.time())."""

    directory: str
    at: float
    available: int | None = None
    newest_bytes: int | None = None
    newest_path: str | None = None
    error: str | None = None  # why there is no number (a share not answering)


def measure(directory: str, guard: MountGuard | None = None) -> Reading:
    """statvfs and the checkpoint scan, both through the guard (bounded by its timeouts)."""
    g = guard if guard is not None else _default_guard()
    key = normalise(directory)
    now = time.time()
    try:
        mounts = read_mounts()
        mountpoint = mount_for_path(key, mounts).mountpoint
        raw = g.call(SPACE_KEY.format(mountpoint), "inspect", what="statvfs", path=key)
        available = space_fields(os.statvfs_result(tuple(raw["statvfs"])))["avail_bytes"]
        info = None
        if raw["exists"] and raw["is_dir"]:
            info = scan_checkpoints_guarded(g, mountpoint, key, DEFAULTS)
    except (OSError, LookupError, MountUnresponsive, WorkerUnavailable, WorkerFailed) as exc:
        return Reading(key, now, error=f"{type(exc).__name__}: {exc}")
    if info is None:
        return Reading(key, now, available=available)
    return Reading(key, now, available, info.newest_bytes, info.newest_path)


class SpaceWatch:
    """Readings of a few directories, refreshed every ``every`` seconds on a daemon thread.

    ``check()`` answers from the latest readings at once: a ``CheckpointWontFit`` for the
    first directory whose newest save is larger than its free space, else None (also while
    a directory has no reading yet, or its share does not answer: not knowing is no reason
    to stop a run).
    """

    def __init__(
        self,
        directories: Iterable[str],
        *,
        every: float = SPACE_EVERY_S,
        guard: MountGuard | None = None,
    ) -> None:
        self.directories = list(dict.fromkeys(normalise(d) for d in directories))
        self.every = float(every)
        self._guard = guard
        self._readings: dict[str, Reading] = {}
        self._lock = threading.Lock()
        self._wake = {d: threading.Event() for d in self.directories}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> SpaceWatch:
        """One daemon thread per directory: a share that hangs never holds up the readings of
        a local checkpoint directory."""
        if not self._threads:
            for directory in self.directories:
                thread = threading.Thread(
                    target=self._run, args=(directory,), name="trainwatch-space", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return self

    def _run(self, directory: str) -> None:
        wake = self._wake[directory]
        while not self._stop.is_set():
            reading = measure(directory, self._guard)
            with self._lock:
                self._readings[directory] = reading
            wake.wait(self.every)
            wake.clear()

    def refresh(self) -> None:
        """Measure again now (after a save: the newest save changed)."""
        for wake in self._wake.values():
            wake.set()

    def wait_measured(self, timeout: float) -> bool:
        """True once every directory has a reading (tests; a caller that can afford it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self._readings) == len(self.directories):
                    return True
            time.sleep(0.02)
        return False

    def readings(self) -> list[Reading]:
        with self._lock:
            return list(self._readings.values())

    def check(self, name: str = "the next checkpoint") -> CheckpointWontFit | None:
        for r in self.readings():
            if r.available is None or not r.newest_bytes:
                continue
            refusal = wont_fit(name, r.directory, r.newest_bytes, r.available, r.newest_path)
            if refusal is not None:
                return refusal
        return None

    def check_now(self, name: str = "the next checkpoint") -> CheckpointWontFit | None:
        """``check`` from readings taken now, on the caller's thread (through the guard, so
        bounded by its timeouts): for a caller about to wait for room anyway."""
        for directory in self.directories:
            reading = measure(directory, self._guard)
            with self._lock:
                self._readings[directory] = reading
        return self.check(name)

    def close(self) -> None:
        self._stop.set()
        self.refresh()
