"""Recorded free space as shared evidence for the fill estimate (issue 23, item 3).

The kernel's sampler and the Jupyter server's sampler judge the same filesystem; one that
started watching in the middle of a fill has less of it in its own History. ``RecordedPast``
is the ``past`` reader of core.storage.fill.with_past: it reads the ``avail_bytes`` recorded for any
path on the same filesystem (core.storage.fill's key: the mountpoint, and the size, so a directory
under a project quota is not mixed with its disk) from the store, read-only.

Why it is safe on the sampler thread: the store is on a local filesystem by construction
(core.record.location), opened read-only (``mode=ro``: nothing is created or moved; a
missing file, one that is not ours or one no writer has open is no past), waited on at most
``fill_past_timeout_s``, read at most once per ``fill_past_refresh_s`` per filesystem and
for the fit window at most, and any error is no past.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, replace

from ..defaults import DEFAULTS, Defaults
from ..storage.fill import FilesystemKey
from ..storage.mounts import mount_for_path, read_mounts
from .codec import BYTES_QUANTUM
from .store import Store

log = logging.getLogger(__name__)

MAX_PATHS = 8  # recorded paths read per filesystem, at most
AVAIL, TOTAL = "avail_bytes", "total_bytes"


@dataclass(frozen=True, slots=True)
class _Read:
    """One filesystem's recorded readings as read at ``at`` (sample time)."""

    at: float
    times: list[float]
    avail: list[float]


class RecordedPast:
    """``past(key, since, until, now)``: recorded (times, avail) of a filesystem in
    ``[since, until)``, oldest first; empty when the store has none or cannot be read."""

    def __init__(self, path: str, defaults: Defaults = DEFAULTS) -> None:
        self.path = path
        self.defaults = defaults
        self.reads = 0  # times the store was opened (tests, diagnostics)
        self._cache: dict[FilesystemKey, _Read] = {}

    def __call__(
        self, key: FilesystemKey, since: float, until: float, now: float
    ) -> tuple[list[float], list[float]]:
        d = self.defaults
        cached = self._cache.get(key)
        if cached is None or not 0 <= now - cached.at < d.fill_past_refresh_s:
            # keep only filesystems asked about within the window: memory stays bounded
            self._cache = {k: c for k, c in self._cache.items() if now - c.at < d.fill_window_s}
            times, avail = self._read(key, now - d.fill_window_s, now)
            cached = self._cache[key] = _Read(now, times, avail)
        pairs = [
            (t, v) for t, v in zip(cached.times, cached.avail, strict=True) if since <= t < until
        ]
        return [t for t, _ in pairs], [v for _, v in pairs]

    def _read(
        self, key: FilesystemKey, since: float, until: float
    ) -> tuple[list[float], list[float]]:
        if not all(os.path.exists(self.path + end) for end in ("-wal", "-shm")):
            # no writer has it open (each keeps its WAL while it records): nothing is being
            # recorded now, and a reader opening it would make the -wal and -shm files itself
            return [], []
        try:
            store = Store(
                self.path,
                readonly=True,
                defaults=replace(
                    self.defaults, record_busy_timeout_s=self.defaults.fill_past_timeout_s
                ),
            )
        except Exception as exc:  # absent, not ours, unreadable: no past
            log.debug("trainwatch: no recorded past from %s: %s", self.path, exc)
            return [], []
        self.reads += 1
        try:
            return _readings(store, key, since, until, self.defaults.record_every_s)
        except Exception as exc:  # a damaged or busy store is no past, never an error
            log.debug("trainwatch: reading the recorded past failed: %s", exc)
            return [], []
        finally:
            store.close()


def _on_filesystem(name: str, key: FilesystemKey) -> bool:
    """Whether the recorded path ``name`` lies on the filesystem ``key`` names (by the mount
    table only: nothing touches the path, which may be on a dead mount)."""
    if name == key[0]:
        return True
    try:
        return mount_for_path(name, read_mounts()).mountpoint == key[0]
    except (LookupError, OSError):
        return False


def _readings(
    store: Store, key: FilesystemKey, since: float, until: float, gap: float
) -> tuple[list[float], list[float]]:
    """The readings of a recorded path on ``key``'s filesystem while its size was ``key``'s
    (all paths on one filesystem see the same free space): the path with the most of them,
    paths read one at a time until one reaches back to within ``gap`` of ``since``."""
    names = [k[len("path:") : -len(AVAIL) - 1] for k in store.keys(f"path:*:{AVAIL}")]
    best: tuple[list[float], list[float]] = ([], [])
    for name in [n for n in names if _on_filesystem(n, key)][:MAX_PATHS]:
        columns = store.read([f"path:{name}:{AVAIL}", f"path:{name}:{TOTAL}"], since, until)
        ts, vs = columns.get(f"path:{name}:{AVAIL}", ([], []))
        sizes = dict(zip(*columns.get(f"path:{name}:{TOTAL}", ([], [])), strict=True))
        pairs = [
            (t, v)
            for t, v in zip(ts, vs, strict=True)
            if math.isfinite(v) and (key[1] is None or _same_size(sizes.get(t), key[1]))
        ]
        if len(pairs) > len(best[0]):
            best = ([t for t, _ in pairs], [v for _, v in pairs])
        if best[0] and best[0][0] <= since + gap:
            break
    return best


def _same_size(recorded: float | None, size: int) -> bool:
    """Sizes are recorded in 4 KiB steps (core.record.codec): equal within half of one."""
    return recorded is not None and abs(recorded - size) <= BYTES_QUANTUM / 2
