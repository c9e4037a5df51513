"""Room on a mirror's local disk: the writer never meets ENOSPC, the newest logs are kept.

Why: ``local_mirror`` moves the training's writes to a local disk so a share that hangs
costs nothing; but then the local disk holds everything the share has not taken, and a
TensorBoard writer that meets ENOSPC dies mid-run (tensorboardX's writer thread ends, the
next ``add_scalar`` waits for ever on its full queue; ``flush`` raises into the loop).

A keeper thread looks at the local filesystem every ``every`` seconds (a statvfs of a local
disk: never the share). Under twice the reserve, runs of records the share already holds are
released in the event files (``*tfevents*``, append-only, held open by their writer): they
are replaced by one padding record of the same length (fix.mirror.tfrecord), its zeros punched out
(FALLOC_FL_PUNCH_HOLE: the file keeps its size, the writer its offset). Under the reserve,
with the share not taking the logs, the oldest records not yet copied go the same way, as
few as bring the free space back to twice the reserve; each run is listed (file, byte
range) in the mirror's status and one warning line, and reaches the share as padding that
TensorBoard skips, so the records after it (the newest) are read.

Each pad is recorded beside the logs before it is made (mirror.released), so a mirror that
starts again knows which local bytes are padding (the share has the records) and completes a
pad a killed process left half made. Only files with one name are padded (a hard link is
another run's log too), and no drop is made before the mirror knows what the share holds.

The mirror thread tells the keeper where it must not write (``floors``: the end of what was
handed to the copy helper this round, so a copy never reads half a record and half padding)
and holds ``lock`` while it plans (its proofs read the local bytes the keeper changes).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...core.defaults import DEFAULTS
from ...core.paths.names import printable
from ..space import fmt_size
from . import plan as mp
from . import tfrecord
from .released import Entry, ReleasedLog

log = logging.getLogger(__name__)

PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (linux/falloc.h)
MARK_BYTES = 64 * 1024  # record starts remembered this far apart (the unit freed)
MIN_RUN = 2 * 4096  # a shorter run frees no block: left alone
LISTED = 20  # dropped runs kept for the status (the totals count them all)
WARN_EVERY_S = 60.0  # one warning line for the first drop, then at most this often
EVENT_MARK = "tfevents"


@dataclass
class Frames:
    """Where one event file's records start, as far as it was walked."""

    ino: int
    first_end: int = 0  # the first record (file_version) is never released
    cursor: int = 0  # records start here; walked up to here
    marks: list[int] = field(default_factory=list)  # record starts, MARK_BYTES apart
    dropped_to: int = 0  # the end of the last run dropped (padding already)
    bad: bool = False  # not a TFRecord stream: never touched

    def at_or_below(self, offset: int) -> int | None:
        best = None
        for m in self.marks:
            if m > offset:
                break
            best = m
        return best

    def at_or_above(self, offset: int) -> int | None:
        return next((m for m in self.marks if m >= offset), None)


@dataclass(frozen=True)
class Dropped:
    """Records not yet copied that were given up for room: ``[start, end)`` of ``rel``."""

    rel: str
    start: int
    end: int
    at: float  # time.time()

    def to_json(self) -> dict[str, Any]:
        return {"file": self.rel, "start": self.start, "end": self.end, "at": self.at}

    def text(self) -> str:
        return f"{printable(self.rel)} bytes {self.start}-{self.end}"


_fallocate: Any = None


def punch(fd: int, offset: int, length: int) -> None:
    """Free the blocks of ``[offset, offset + length)`` (reads as zeros; size kept)."""
    global _fallocate
    if _fallocate is None:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        _fallocate = fn
    if _fallocate(fd, PUNCH, offset, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class NotOurs(OSError):
    """The file has another name too (a hard link: another run's log kept elsewhere), or is
    no regular file: its bytes are not the mirror's to change."""


def pad(path: str, start: int, end: int) -> None:
    """Replace the records in ``[start, end)`` of ``path`` by one padding record (zeros
    punched out): the footer and the zeros first, the header last, so the bytes at
    ``start`` claim a new length only once the record is whole."""
    head, foot = tfrecord.padding(end - start)
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        if not _only_name(os.fstat(fd)):
            raise NotOurs(errno.EMLINK, "the file has another name", path)
        body = start + len(head)
        punch(fd, body, end - len(foot) - body)
        os.pwrite(fd, foot, end - len(foot))
        os.pwrite(fd, head, start)
    finally:
        os.close(fd)


def reserve_of(total: int) -> int:
    """The free space kept on a local disk of ``total`` bytes (core.defaults)."""
    return int(min(total * DEFAULTS.mirror_reserve_fraction, DEFAULTS.mirror_reserve_bytes))


class RoomKeeper:
    """The keeper of one mirror's local directory (see the module's text)."""

    def __init__(
        self,
        local: str,
        copied: Callable[[], dict[str, mp.Copied]],
        set_released: Callable[[str, int, int, int], None],
        *,
        released: ReleasedLog | None = None,
        ready: Callable[[str, int], bool] = lambda rel, ino: True,
        reserve: int | None = None,
        every: float | None = None,
        tell: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.local = local
        self._copied, self._set_released = copied, set_released
        # every pad is recorded there before it is made (a restart must know the padding)
        self.released = released if released is not None else ReleasedLog(local)
        self._ready = ready  # (rel, ino): may be dropped (the mirror knows what the share has)
        self.reserve = reserve
        self.every = DEFAULTS.mirror_room_every_s if every is None else float(every)
        self._tell = tell if tell is not None else (lambda line: log.warning("%s", line))
        self.lock = threading.Lock()  # held by the mirror thread while it plans
        self.floors: dict[str, int] = {}  # rel -> nothing below is changed (under lock)
        self._frames: dict[str, Frames] = {}
        self.released_bytes = self.dropped_bytes = 0
        self.dropped: list[Dropped] = []  # the last LISTED runs
        self.dropped_runs = 0
        self._clock, self._warned_at = clock, -float("inf")
        self._unsaid: list[Dropped] = []  # dropped since the last warning line
        self.error: str | None = None  # why room could not be made (no hole punching)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainwatch-room", daemon=True)

    def start(self) -> RoomKeeper:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.look()
            except mp.LocalGone:
                pass  # the mirror says so
            except Exception:  # a bug must not end the keeper silently
                log.exception("trainwatch: the mirror's room keeper failed")
            self._stop.wait(self.every)

    # -- one look -----------------------------------------------------------------------
    def _space(self) -> tuple[int, int]:
        st = os.statvfs(self.local)
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize

    def look(self) -> None:
        """Walk what the event files gained; release, then drop, as the free space asks."""
        files, _ = mp.scan(self.local, mp.SCAN_LIMIT)
        events = {rel: f for rel, f in files.items() if EVENT_MARK in os.path.basename(rel)}
        for rel in set(self._frames) - set(events):
            del self._frames[rel]
        for rel, f in events.items():
            self._walk(rel, f)
        free, total = self._space()
        reserve = self.reserve if self.reserve is not None else reserve_of(total)
        if free >= 2 * reserve:
            return
        with self.lock:
            self._release(events)
            free, _ = self._space()
            if free < reserve:
                self._drop(events, 2 * reserve - free, free)

    def _walk(self, rel: str, f: mp.LocalFile) -> None:
        fr = self._frames.get(rel)
        if fr is None or fr.ino != f.ino or f.size < fr.cursor:
            fr = self._frames[rel] = Frames(f.ino)
        if fr.bad or f.size <= fr.cursor:
            return
        path = os.path.join(self.local, rel)
        try:
            with open(path, "rb") as fh:
                if not _only_name(os.fstat(fh.fileno())):
                    fr.bad = True  # another name elsewhere: never padded
                    return
                for nxt in tfrecord.walk(fh, fr.cursor, f.size):
                    if not fr.first_end:
                        fr.first_end = nxt
                        fr.marks.append(nxt)
                    elif nxt - fr.marks[-1] >= MARK_BYTES:
                        fr.marks.append(nxt)
                    fr.cursor = nxt
        except OSError:
            return
        if not fr.first_end and f.size >= tfrecord.HEADER:
            fr.bad = not _starts_a_record(path)  # not a TFRecord stream: never touched

    def _release(self, events: dict[str, mp.LocalFile]) -> None:
        """Pad the records the share holds, in every event file (under ``lock``)."""
        copied = self._copied()
        for rel, f in events.items():
            c, fr = copied.get(rel), self._frames.get(rel)
            if c is None or fr is None or fr.bad or c.ino != f.ino or not fr.first_end:
                continue
            # the last release ended at a record start: the released prefix stays one run
            start = max(c.released, fr.first_end)
            end = fr.at_or_below(min(c.size, self.floors.get(rel, c.size)))
            if end is None or end - start < MIN_RUN:
                continue
            if self._pad(rel, f.ino, start, end, release=True):
                self._set_released(rel, f.ino, start, end)
                self.released_bytes += end - start

    def _drop(self, events: dict[str, mp.LocalFile], need: int, free: int) -> None:
        """Pad the oldest records not yet copied until ``need`` bytes are free (under
        ``lock``); each run listed, one warning line for all of them."""
        copied = self._copied()
        runs: list[Dropped] = []
        for rel, f in sorted(events.items(), key=lambda kv: kv[1].mtime_ns):
            fr = self._frames.get(rel)
            if need <= 0 or fr is None or fr.bad or not fr.first_end or fr.ino != f.ino:
                continue
            if not self._ready(rel, f.ino):
                continue
            c = copied.get(rel)
            done = c.size if c is not None and c.ino == f.ino else 0
            e = self.released.get(rel, f.ino)
            lo = max(done, e.released if e is not None else 0, fr.first_end)
            start = fr.at_or_above(max(lo, self.floors.get(rel, 0), fr.dropped_to))
            if start is None:
                continue
            end = fr.at_or_above(start + need) or fr.cursor
            if end - start < MIN_RUN or not self._pad(rel, f.ino, start, end, release=False):
                continue
            fr.dropped_to = end
            runs.append(Dropped(rel, start, end, time.time()))
            need -= end - start
        if not runs:
            return
        self.dropped_bytes += sum(r.end - r.start for r in runs)
        self.dropped_runs += len(runs)
        self.dropped = (self.dropped + runs)[-LISTED:]
        self._unsaid += runs
        now = self._clock()
        if now - self._warned_at < WARN_EVERY_S:
            return
        self._warned_at, runs, self._unsaid = now, self._unsaid, []
        lost = sum(r.end - r.start for r in runs)
        listed = "; ".join(r.text() for r in runs[:LISTED])
        more = f"; and {len(runs) - LISTED} more" if len(runs) > LISTED else ""
        self._tell(
            f"trainwatch: mirror {printable(self.local)}: the local disk is nearly full "
            f"({fmt_size(free)} free) and the share has not taken the logs: dropped "
            f"{fmt_size(lost)} not yet copied, the oldest first "
            f"({listed}{more}); the newest are kept (the mirror's status lists them)"
        )

    def _pad(self, rel: str, ino: int, start: int, end: int, *, release: bool) -> bool:
        """Pad ``[start, end)`` of ``rel``, recorded (mirror.released) before it is made."""
        path = os.path.join(self.local, rel)
        old = self.released.get(rel, ino)
        try:
            entry = old if old is not None else self._entry(path, ino, rel)
            if release:
                entry = replace(entry, released=end, pad_from=start)
            self.released.put(rel, replace(entry, pending=(start, end)))
        except OSError as exc:
            self.error = f"could not record what is released in {printable(rel)}: {exc.strerror}"
            return False
        try:
            pad(path, start, end)
        except NotOurs:
            self._undo(rel, old)
            self._frames[rel].bad = True
            return False
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):  # punch refused: nothing changed
                self._undo(rel, old)
                self.error = "the local filesystem cannot punch holes: no room can be made"
            else:
                self.error = f"could not make room in {printable(rel)}: {exc.strerror}"
            log.debug("trainwatch: pad %s [%d, %d) failed", rel, start, end, exc_info=True)
            return False
        with contextlib.suppress(OSError):  # else the next start completes it again
            self.released.put(rel, entry)
        self.error = None
        fr = self._frames.get(rel)
        if fr is not None:  # the marks inside are no record starts a run may begin at now
            fr.marks = [m for m in fr.marks if not start < m < end]
        return True

    def _entry(self, path: str, ino: int, rel: str) -> Entry:
        fr = self._frames[rel]
        digest = mp._hash_range(path, 0, fr.first_end)
        if digest is None:
            raise OSError(errno.EIO, "the first record cannot be read")
        return Entry(ino, fr.first_end, digest)

    def _undo(self, rel: str, old: Entry | None) -> None:
        """A pad the filesystem refused changed nothing (the hole is punched first); one that
        failed later stays pending: the next start completes it."""
        try:
            if old is None:
                self.released.forget(rel)
            else:
                self.released.put(rel, old)
        except OSError:  # the next start finds the pending run and makes it
            log.debug("trainwatch: could not undo the record of %s", rel, exc_info=True)

    def state(self) -> dict[str, Any]:
        """For the mirror's status."""
        return {
            "bytes_released": self.released_bytes,
            "bytes_dropped": self.dropped_bytes,
            "dropped": [r.to_json() for r in self.dropped],
        }


def _only_name(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def _starts_a_record(path: str) -> bool:
    """The file begins with a record header whose crc checks (the record may be unfinished)."""
    try:
        with open(path, "rb") as fh:
            return tfrecord.header_checks(fh.read(tfrecord.HEADER))
    except OSError:
        return True  # judged again at the next look
