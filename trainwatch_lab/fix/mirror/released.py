"""What a mirror released in its local event files, kept on the local disk across restarts.

Why: once the room keeper (mirror.room) has replaced a local file's copied records by
padding, the share's copy is the only one of them. A mirror that starts again (a killed
kernel, ``trainwatch-lab mirror`` rerun) must know that the local prefix is padding, or it
would take the file for a changed one and copy the padding over the share's records.

One small JSON file beside the logs (``.trainwatch-mirror-released.json``: the scan never
copies it, never on the share), replaced atomically and fsynced. Each pad is written there
before it is made (``pending``), and the pad cleared after: a process killed halfway leaves
a file whose pending run the next mirror completes (the share holds those bytes: only runs
it holds are released; dropped runs were being given up anyway).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from ...core.atomic_write import write_atomically
from . import plan as mp
from . import tfrecord

log = logging.getLogger(__name__)

FILE = f"{mp.LOCK_PREFIX}-released.json"
MAX_BYTES = 4 * 1024 * 1024  # a bigger file is not ours: read as empty


@dataclass(frozen=True)
class Entry:
    """One event file: ``[head_end, released)`` was copied then padded here; the padding
    record ``[pad_from, released)`` is the last one made; ``pending`` a pad being made."""

    ino: int
    head_end: int  # the first record, never padded: it tells the file is the same one
    head_digest: str
    released: int = 0
    pad_from: int = 0
    pending: tuple[int, int] | None = None

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Entry:
        pending = raw.get("pending")
        return Entry(
            int(raw["ino"]),
            int(raw["head_end"]),
            str(raw["head_digest"]),
            int(raw.get("released", 0)),
            int(raw.get("pad_from", 0)),
            (int(pending[0]), int(pending[1])) if pending else None,
        )


class ReleasedLog:
    """The entries of one local directory, as on disk after each ``save``."""

    def __init__(self, local: str) -> None:
        self.local = local
        self.path = os.path.join(local, FILE)
        self._lock = threading.Lock()  # the keeper's thread and the mirror's
        self.entries: dict[str, Entry] = _load(self.path)

    def get(self, rel: str, ino: int) -> Entry | None:
        with self._lock:
            e = self.entries.get(rel)
        return e if e is not None and e.ino == ino else None

    def put(self, rel: str, entry: Entry) -> None:
        """Record ``entry`` on disk first (OSError: nothing may be padded then)."""
        with self._lock:
            entries = {**self.entries, rel: entry}
            _save(self.path, entries)
            self.entries = entries

    def forget(self, rel: str) -> None:
        """``rel`` was copied whole again (or replaced): no released prefix any more."""
        with self._lock:
            if rel not in self.entries:
                return
            entries = {k: v for k, v in self.entries.items() if k != rel}
            try:
                _save(self.path, entries)
            except OSError:  # an entry that no longer matches is dropped at the next start
                log.debug("trainwatch: could not write %s", self.path, exc_info=True)
            self.entries = entries

    def recover(self, pad: Callable[[str, int, int], None]) -> dict[str, Entry]:
        """At a start: the entries whose local file is still the one padded (same inode,
        same first record), each pad a killed process left half made completed (``pad``:
        mirror.room's); the others forgotten."""
        kept: dict[str, Entry] = {}
        for rel, e in self.entries.items():
            path = os.path.join(self.local, rel)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_ino != e.ino or mp._hash_range(path, 0, e.head_end) != e.head_digest:
                continue
            if e.pending is not None:
                start, end = e.pending
                if st.st_size < end:
                    continue
                try:
                    if not tfrecord.padding_at(path, start, end):
                        pad(path, start, end)
                except OSError:
                    log.warning("trainwatch: could not complete the padding of %s", path)
                    continue
                e = replace(e, pending=None)
            kept[rel] = e
        with self._lock:
            if kept != self.entries:
                try:
                    _save(self.path, kept)
                except OSError:
                    log.debug("trainwatch: could not write %s", self.path, exc_info=True)
            self.entries = kept
        return dict(kept)


def _load(path: str) -> dict[str, Entry]:
    try:
        with open(path, "rb") as fh:
            raw = json.loads(fh.read(MAX_BYTES + 1))
        return {str(rel): Entry.from_json(e) for rel, e in raw.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        log.warning("trainwatch: %s is unreadable: taken as empty", path)
        return {}


def _save(path: str, entries: dict[str, Entry]) -> None:
    data = json.dumps({rel: asdict(e) for rel, e in entries.items()}).encode()
    write_atomically(path, data, mode=0o600)
