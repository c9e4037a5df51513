"""What the mirror must copy: pure planning over a local scan and what the share holds.

Log files mostly grow (TensorBoard event files, CSV and JSON lines): a file that grew since
its last copy gets only its new bytes, written at the same offset on the share. That it only
grew is proven, not assumed: the share's copy is known as the digests of the byte ranges
written there, as the helper read them (``Copied.ranges``), and the local file must still
hold exactly those bytes before every append: all of them for a file up to
``FULL_CHECK_BYTES``; for a bigger one its first ``HEAD_BYTES`` and its last ``TAIL_BYTES``
before the old end (where headers are rewritten in place, and where the last appends
landed), the bytes between once proven and not read again, so a round costs what was
appended, not the whole file (a 4.5 GiB log used to be hashed whole every round). A file
whose identity (inode, size, modification and change time) did not move since it was
copied is not read at all. Anything else (a rewrite anywhere, a new inode, a shrink, a SQLite
database, which is rewritten in place) is copied whole into a fresh temporary name on the
share, fsync'ed and renamed over the old copy, so a reader there (TensorBoard) sees the old
file or the new one, never half of one. An append never creates a file: a copy gone from
the share, or shorter than it should be, is copied whole (core.worker.files).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...core.paths.names import printable
from ...core.worker.files import DIGEST_BYTES
from . import tfrecord

CHUNK_BYTES = 4 * 1024 * 1024  # one item of a copy call at most
BATCH_BYTES = 4 * 1024 * 1024  # bytes per call through the guard
HASH_CHUNK = 1024 * 1024  # read at a time while hashing a local file
FULL_CHECK_BYTES = 8 * 1024 * 1024  # a file up to this is proven whole before each append
HEAD_BYTES = 1024 * 1024  # a bigger one: its head (headers rewritten in place) ...
TAIL_BYTES = 1024 * 1024  # ... and its last bytes are proven again, the rest once

TMP_PREFIX = ".twmirror-"  # the share-side temporary names (never "tfevents" in them)
LOCK_PREFIX = ".trainwatch-mirror"  # local bookkeeping, never copied
SHARE_LOCK = f"{LOCK_PREFIX}-share.lock"  # on the share: who mirrors into this directory
SCAN_LIMIT = 100_000
# formats that rewrite earlier bytes in place: never appended to, always copied whole
IN_PLACE_MAGIC = (b"SQLite format 3\x00",)

MOVED = -2  # Copied.mtime_ns of a copy whose file changed while it was read
Range = tuple[int, int, str]  # [start, end) and the hex digest of those bytes
Q = TypeVar("Q")


@dataclass(frozen=True, slots=True)
class LocalFile:
    rel: str
    size: int
    ino: int
    mtime_ns: int
    ctime_ns: int = 0


@dataclass(frozen=True, slots=True)
class Copied:
    """What the share holds of one local file: its first ``size`` bytes, whose digests are
    ``ranges``; ``mtime_ns``/``ctime_ns`` the local file's times when the copy ended whole
    (-1 while only part of it was copied, ``MOVED`` when it changed while it was read)."""

    size: int
    ino: int
    mtime_ns: int
    ranges: tuple[Range, ...]
    ctime_ns: int = -1
    released: int = 0  # bytes before this were released locally (mirror.room): not proven
    pad_from: int = 0  # ``[pad_from, released)``: the last padding record the release made

    def same(self, f: LocalFile) -> bool:
        """The local file did not move since this copy ended whole: nothing to read."""
        return (self.ino, self.size, self.mtime_ns, self.ctime_ns) == (
            f.ino,
            f.size,
            f.mtime_ns,
            f.ctime_ns,
        ) and self.mtime_ns >= 0


@dataclass(frozen=True, slots=True)
class Job:
    """One file to copy: from ``offset`` to ``file.size``; ``append`` writes in place after
    ``kept``, the digests of the share's bytes before ``offset`` (just proven equal to the
    local ones)."""

    file: LocalFile
    offset: int
    append: bool
    kept: tuple[Range, ...] = ()

    @property
    def length(self) -> int:
        return self.file.size - self.offset


class LocalGone(OSError):
    """The local directory is not the one the mirror started with (renamed, deleted,
    replaced), or a directory under it cannot be read: what is written there now would
    never reach the share, so no round may say it copied everything."""


def identity(local_dir: str) -> tuple[int, int]:
    """``(st_dev, st_ino)`` of the local directory: what a rename-and-recreate changes."""
    st = os.stat(local_dir)
    return st.st_dev, st.st_ino


def scan(
    local_dir: str, limit: int = SCAN_LIMIT, expected: tuple[int, int] | None = None
) -> tuple[dict[str, LocalFile], bool]:
    """Regular files under ``local_dir`` (a local disk: read on our own thread), symlinks not
    followed; True as well when ``limit`` cut the listing short. Raises LocalGone when
    ``local_dir`` cannot be listed or is no longer ``expected`` (os.walk alone would list
    nothing and say nothing), or a directory under it cannot be read; a subdirectory
    removed during the walk is no error (its files are gone)."""

    def failed(exc: OSError) -> None:
        if isinstance(exc, FileNotFoundError) and exc.filename != local_dir:
            return
        where = printable(str(exc.filename or local_dir))
        raise LocalGone(exc.errno, f"cannot list {where}: {exc.strerror}", exc.filename)

    try:
        now = identity(local_dir)
    except OSError as exc:
        failed(exc)
    if expected is not None and now != expected:
        raise LocalGone(
            errno.ENOENT,
            f"{printable(local_dir)} is another directory than the one mirrored (renamed or "
            "deleted and made again)",
            local_dir,
        )
    files: dict[str, LocalFile] = {}
    for root, dirs, names in os.walk(local_dir, onerror=failed):
        dirs[:] = [d for d in dirs if not d.startswith(LOCK_PREFIX)]
        for name in names:
            if name.startswith(LOCK_PREFIX):
                continue
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    rel = os.path.relpath(path, local_dir)
                    files[rel] = LocalFile(
                        rel, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns
                    )
                    if len(files) >= limit:
                        return files, True
    return files, False


def zones(size: int) -> tuple[int, int]:
    """``(head_end, tail_start)`` of a file of ``size`` bytes: the bytes before ``head_end``
    and from ``tail_start`` are proven again before each append, those between are not.
    A file up to ``FULL_CHECK_BYTES`` is all head."""
    if size <= FULL_CHECK_BYTES:
        return size, size
    return HEAD_BYTES, size - TAIL_BYTES


def _reproven(fh: Any, ranges: Sequence[Range], size: int, released: int = 0) -> list[Range] | None:
    """Read again the ranges that reach into the head or the tail zone (each must hold its
    digest), skip the others and those reaching below ``released`` (the local bytes there
    were replaced by padding once copied); the result, as at most three ranges (head, a
    middle with no digest, tail) whose digests are of the bytes just read, or None on a
    mismatch."""
    head_end, tail_start = zones(size)
    out: list[Range] = []
    run: list[Any] = []  # [start, end, hasher or None, zone] of the range being put together

    def close_run() -> None:
        if run:
            out.append((run[0], run[1], run[2].hexdigest() if run[2] is not None else ""))
            run.clear()

    def add(a: int, b: int, hasher: Any, zone: int) -> None:
        if run and run[3] == zone:
            run[1] = b
            return
        close_run()
        run.extend([a, b, hasher, zone])

    for start, end, expected in ranges:
        if (start >= head_end and end <= tail_start) or start < released:
            add(start, end, None, 1)  # proven before (or released): not read again
            continue
        if not expected:
            return None
        cuts = sorted({start, end, *(x for x in (head_end, tail_start) if start < x < end)})
        whole = hashlib.blake2b(digest_size=DIGEST_BYTES)
        fh.seek(start)
        for a, b in itertools.pairwise(cuts):
            zone = 0 if b <= head_end else (2 if a >= tail_start else 1)
            keep = run[2] if run and run[3] == zone and zone != 1 else None
            part = keep if keep is not None else hashlib.blake2b(digest_size=DIGEST_BYTES)
            left = b - a
            while left > 0 and (chunk := fh.read(min(HASH_CHUNK, left))):
                whole.update(chunk)
                if zone != 1:
                    part.update(chunk)
                left -= len(chunk)
            if left:
                return None
            add(a, b, part if zone != 1 else None, zone)
        if whole.hexdigest() != expected:
            return None
    close_run()
    return out


def in_place_format(path: str) -> bool:
    """A file format that rewrites its earlier bytes (SQLite): copied whole every time."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(32)
    except OSError:
        return False
    return head.startswith(IN_PLACE_MAGIC)


def proven_prefix(path: str, c: Copied) -> tuple[Range, ...] | None:
    """The share's bytes before ``c.size``, when the local file still holds them (the
    ranges in the head and tail zones read again, each digest equal; the others proven
    before); None otherwise. The digests returned are of the bytes just read, which equal
    the share's: no later change of the file can slip in."""
    if c.size == 0:
        return ()
    ends = [0] + [end for _, end, _ in c.ranges]
    if not c.ranges or any(r[0] != e for r, e in zip(c.ranges, ends, strict=False)):
        return None
    if ends[-1] != c.size:
        return None
    try:
        with open(path, "rb") as fh:
            kept = _reproven(fh, c.ranges, c.size, c.released)
    except OSError:
        return None
    return None if kept is None else tuple(kept)


def plan(local_dir: str, files: dict[str, LocalFile], copied: dict[str, Copied]) -> list[Job]:
    """The copies that bring the share up to date, smallest first (many small logs land
    before one big file holds them up)."""
    jobs = []
    for rel, f in files.items():
        c = copied.get(rel)
        if c is not None and c.same(f):
            continue
        path = os.path.join(local_dir, rel)
        if c is not None and c.released and c.ino == f.ino:
            job = _after_release(path, f, c)
            if job is not None:
                jobs.append(job)
                continue
        if c is not None and c.ino == f.ino and f.size >= c.size and not in_place_format(path):
            kept = proven_prefix(path, c)
            if kept is not None:
                jobs.append(Job(f, c.size, append=True, kept=kept))
                continue
        jobs.append(Job(f, 0, append=False))
    jobs.sort(key=lambda j: j.length)
    return jobs


def _after_release(path: str, f: LocalFile, c: Copied) -> Job | None:
    """The copy of a file whose copied prefix was released locally (padding there, the
    records only on the share): never the padding over them. Appended to; rewritten from
    ``c.released`` when it shrank or its last bytes changed; None (copied whole) only once
    the local file no longer holds that padding (the writer rewrote it: its new bytes)."""
    if f.size < c.released or not _padded(path, c):
        return None
    if f.size >= c.size:
        kept = proven_prefix(path, c)
        if kept is not None:
            return Job(f, c.size, append=True, kept=kept)
    return Job(f, c.released, append=True, kept=((0, c.released, ""),))


def _padded(path: str, c: Copied) -> bool:
    try:
        return tfrecord.padding_at(path, c.pad_from, c.released)
    except OSError:
        return False


def pending_bytes(files: dict[str, LocalFile], copied: dict[str, Copied]) -> int:
    """Bytes the share lacks, as ``plan`` would copy them (without reading any file)."""
    total = 0
    for rel, f in files.items():
        c = copied.get(rel)
        if c is not None and c.same(f):
            continue
        # a copy whose file moved while it was read is not proven: all of it is pending
        grew = c is not None and c.ino == f.ino and f.size >= c.size and c.mtime_ns != MOVED
        total += f.size - c.size if grew and c is not None else f.size
    return total


def share_temp(share_dir: str, rel: str) -> str:
    """A fresh, unguessable temporary name beside the file on the share (the helper creates
    it exclusively, never through a link)."""
    name = f"{TMP_PREFIX}{secrets.token_hex(8)}.tmp"
    return os.path.join(share_dir, os.path.dirname(rel), name)


def items(job: Job, local_dir: str, share_dir: str) -> Iterator[dict[str, Any]]:
    """The copy call's items for one job (core.worker.main.op_copy_ranges), in order."""
    src = os.path.join(local_dir, job.file.rel)
    dst = os.path.join(share_dir, job.file.rel)
    target = dst if job.append else share_temp(share_dir, job.file.rel)
    offset, end = job.offset, job.file.size
    first = True
    while first or offset < end:
        length = min(CHUNK_BYTES, end - offset)
        last = offset + length >= end
        item: dict[str, Any] = {"src": src, "dst": target, "offset": offset, "length": length}
        if not job.append:  # the helper removes it when a range fails
            item["temporary"] = True
        if first and not job.append:
            item["create"] = True
        if last:
            item["mtime_ns"] = job.file.mtime_ns
            if job.append:
                item["end_here"] = True
            else:
                item["rename_to"] = dst
        yield item
        offset += length
        first = False


def seed_candidates(
    files: dict[str, LocalFile], share_files: dict[str, list[int]]
) -> dict[str, LocalFile]:
    """After a restart: the files the share seems to hold whole (same size and modification
    time, which every finished copy sets); each is trusted only once its bytes are proven
    (``seeded``), since a copy recreated with a hole of zeros looks the same."""
    return {
        rel: f
        for rel, (size, mtime_ns) in share_files.items()
        if (f := files.get(rel)) is not None and f.size == size and _same_time(f.mtime_ns, mtime_ns)
    }


def _same_time(local_ns: int, share_ns: int) -> bool:
    """The time the copy was given, as the share keeps it: whole seconds on sshfs (SFTP v3
    carries no fraction), nanoseconds elsewhere."""
    if share_ns % 1_000_000_000 == 0:
        return local_ns // 1_000_000_000 == share_ns // 1_000_000_000
    return local_ns == share_ns


def seed_windows(size: int) -> list[tuple[int, int]]:
    """The byte ranges a restarted mirror compares, local against share: all of a file up to
    ``FULL_CHECK_BYTES``, else its head and tail zones (as ``proven_prefix`` reads them)."""
    head_end, tail_start = zones(size)
    if tail_start >= size:
        return [(0, size)]
    return [(0, head_end), (tail_start, size)]


def seeded(local_dir: str, f: LocalFile, share_digests: Sequence[str | None]) -> Copied | None:
    """What the share holds of ``f`` when the digests of its ``seed_windows`` (taken there)
    are the local file's; the bytes between them (a big file) count as proven."""
    windows = seed_windows(f.size)
    if len(share_digests) != len(windows) or None in share_digests:
        return None
    path = os.path.join(local_dir, f.rel)
    ranges: list[Range] = []
    for (start, end), share_digest in zip(windows, share_digests, strict=True):
        if ranges and ranges[-1][1] < start:
            ranges.append((ranges[-1][1], start, ""))
        if _hash_range(path, start, end) != share_digest:
            return None
        ranges.append((start, end, str(share_digest)))
    return Copied(f.size, f.ino, f.mtime_ns, tuple(ranges), f.ctime_ns)


def _hash_range(path: str, start: int, end: int) -> str | None:
    """The digest of ``path``'s bytes ``[start, end)``; None when it is shorter or unreadable."""
    hasher, left = hashlib.blake2b(digest_size=DIGEST_BYTES), end - start
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            while left > 0 and (chunk := fh.read(min(HASH_CHUNK, left))):
                hasher.update(chunk)
                left -= len(chunk)
    except OSError:
        return None
    return None if left else hasher.hexdigest()


def take_batch(queue: list[Q], size_of: Callable[[Q], int]) -> tuple[list[Q], int]:
    """Take from the front of ``queue`` what one call carries: ``BATCH_BYTES`` at most (one
    item at least)."""
    batch, size = [], 0
    while queue and (not batch or size + size_of(queue[0]) <= BATCH_BYTES):
        batch.append(queue.pop(0))
        size += size_of(batch[-1])
    return batch, size
