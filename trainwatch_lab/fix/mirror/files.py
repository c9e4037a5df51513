"""The mirrors running on this machine, read from the status files they publish.

Why: the panel lives in the Jupyter server, not in the kernel that owns a ``local_mirror``,
so it cannot ask the Mirror object. Each mirror writes its status beside its logs after every
round (``Mirror._publish``: ``.trainwatch-mirror.json``, with the owner's pid); the local side
is on local disk by construction (fix.scratch refuses anything else), so reading those files
is a directory listing and a few small reads, never a touch of the share. We look where
``local_mirror`` puts them by default: ``<root>/trainwatch-mirror-<uid>/*/`` for each scratch
root (fix.scratch.candidates), roots on a network mount left out (judged from the mount table)
and directories another user controls too (a status file planted there is not ours).
A mirror made with an explicit ``local_root=`` elsewhere is found when that root is passed.

A file whose owner process is gone is stale and left out, as is a closed mirror. Each
root is listed on a thread of its own: one that reaches a dead share after all (a symlinked
``~/.cache``) holds that thread, never the caller (the server's sampler), which keeps the last
answer. That thread stays for the next look (a look a second) and ends after
``MIRROR_LANE_IDLE_S`` without one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ...core.defaults import MIRROR_LANE_IDLE_S
from ...core.identity import pid_alive
from ...core.private import untrusted
from ..scratch import base_name, candidates, local_refusal
from .mirror import STATUS_FILE
from .status import MirrorStatus

log = logging.getLogger(__name__)

MAX_MIRRORS = 32  # mirrors listed at most (status files read per look)
MAX_FILE_BYTES = 64 * 1024  # a status file is ~300 bytes: anything bigger is not ours
ROOTS_EVERY_S = 60.0  # the mount table is read again this often to judge the roots
_FIELDS = {f.name for f in fields(MirrorStatus)}
_REQUIRED = _FIELDS - {"error", "bytes_released", "bytes_dropped", "dropped"}


@dataclass(frozen=True)
class Published:
    """One mirror's status as its owner last wrote it."""

    status: MirrorStatus
    pid: int
    every: float | None
    written_at: float  # the file's mtime

    def to_json(self) -> dict[str, Any]:
        """What the panel gets: the status, its owner, and the words (MirrorStatus.text)."""
        return {
            **self.status.to_json(),
            "pid": self.pid,
            "every": self.every,
            "text": self.status.text(),
        }


def read_published(path: str, now: float | None = None) -> Published | None:
    """One status file; None when it is unreadable, not ours, stale (owner gone) or closed.
    ``lag_s`` is brought up to now: what was pending when it was written is still behind."""
    try:
        with open(path, "rb") as fh:
            written_at = os.fstat(fh.fileno()).st_mtime
            raw = fh.read(MAX_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not _REQUIRED.issubset(data):
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid) or data.get("state") == "closed":
        return None
    try:
        status = MirrorStatus(**{k: v for k, v in data.items() if k in _FIELDS})
    except TypeError:
        return None
    if status.bytes_pending:
        since = max(0.0, (time.time() if now is None else now) - written_at)
        status = MirrorStatus(**{**status.to_json(), "lag_s": status.lag_s + since})
    every = data.get("every")
    return Published(status, pid, every if isinstance(every, (int, float)) else None, written_at)


def status_files(roots: Iterable[str], limit: int = MAX_MIRRORS) -> list[str]:
    """The status files under ``<root>/trainwatch-mirror-<uid>/*/`` that exist, at most
    ``limit``; none from a directory another user controls."""
    found: list[str] = []
    for root in roots:
        base = os.path.join(root, base_name())
        if untrusted(base) is not None:
            continue
        with contextlib.suppress(OSError), os.scandir(base) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = os.path.join(base, entry.name, STATUS_FILE)
                if entry.is_dir(follow_symlinks=False) and os.path.isfile(path):
                    found.append(path)
                if len(found) >= limit:
                    return found
    return found


def local_roots(roots: Sequence[str]) -> list[str]:
    """``roots`` without those on a network mount (never listed: this runs every tick)."""
    return [r for r in dict.fromkeys(roots) if local_refusal(r) is None]


class _Lane:
    """One root's lister: a thread that lists when asked and waits ``idle_s`` for the next
    ask before it ends. A listing stuck on a dead share holds only this thread; while it
    runs, nobody asks again (``ask`` says None) and nobody waits for it."""

    def __init__(self, work: Callable[[], None], idle_s: float) -> None:
        self._work = work
        self._idle_s = idle_s
        self._cond = threading.Condition()
        self._pending = False  # asked, not begun
        self._busy = False  # a listing runs (maybe stuck)
        self._done = 0  # listings finished
        self._closed = False
        self._thread: threading.Thread | None = None

    def ask(self) -> int | None:
        """Ask for a listing; the number ``wait`` waits for, or None while one is under way."""
        with self._cond:
            if self._busy or self._pending or self._closed:
                return None
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="trainwatch-mirrors", daemon=True
                )
                self._thread.start()
            else:
                self._cond.notify_all()
            return self._done + 1

    def wait(self, number: int, until: float) -> None:
        """Until listing ``number`` is done or the monotonic clock reaches ``until``."""
        with self._cond:
            while self._done < number:
                left = until - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def close(self) -> None:
        """An idle thread ends now (a stuck one when its listing returns)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                idle_until = time.monotonic() + self._idle_s
                while not self._pending and not self._closed:
                    left = idle_until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if not self._pending or self._closed:
                    self._thread = None  # the next ask starts another
                    self._pending = False
                    return
                self._pending, self._busy = False, True
            try:
                self._work()
            except Exception:  # (a listing that fails keeps the last answer, as before)
                log.exception("trainwatch: listing mirror status files failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._done += 1
                    self._cond.notify_all()


class MirrorFiles:
    """The live mirrors of this machine, for a surface that asks every tick: the roots are
    judged once a minute; each root is listed on a thread of its own (kept between looks)
    that the caller waits for at most ``wait`` seconds, so a root stuck on a dead share keeps
    its last answer (none at first) while the others stay fresh."""

    def __init__(
        self,
        roots: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle_s: float = MIRROR_LANE_IDLE_S,
    ) -> None:
        self._idle_s = idle_s
        self._given = list(roots) if roots is not None else None
        self._clock = clock
        self._roots: list[str] = []
        self._judged = -float("inf")
        self._lock = threading.Lock()
        self._latest: dict[str, list[Published]] = {}  # root -> its last listing
        self._lanes: dict[str, _Lane] = {}  # root -> its lister (roots are few, judged)

    def roots(self) -> list[str]:
        now = self._clock()
        if now - self._judged >= ROOTS_EVERY_S:
            self._judged = now
            self._roots = local_roots(self._given if self._given is not None else candidates())
        return self._roots

    def look(self, wait: float = 5.0) -> list[Published]:
        """The live mirrors: each root listed afresh when that takes under ``wait`` seconds,
        else its last listing (a root still stuck is not listed a second time)."""
        deadline = time.monotonic() + wait
        roots = self.roots()
        asked = []
        with self._lock:
            for root in roots:
                lane = self._lanes.get(root)
                if lane is None:
                    lane = self._lanes[root] = _Lane(lambda r=root: self._refresh(r), self._idle_s)
                number = lane.ask()
                if number is not None:  # (None: its listing still runs, maybe stuck)
                    asked.append((lane, number))
        for lane, number in asked:
            lane.wait(number, deadline)
        with self._lock:
            found = [p for root in roots for p in self._latest.get(root, [])]
        return found[:MAX_MIRRORS]

    def close(self) -> None:
        """End the listers' threads (they end by themselves after ``idle_s`` too)."""
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.close()

    def _refresh(self, root: str) -> None:
        now = time.time()
        found = (read_published(p, now) for p in status_files([root]))
        listed = [p for p in found if p is not None]
        with self._lock:
            self._latest[root] = listed
