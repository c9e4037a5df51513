"""What the mirror must copy: pure planning over a local scan and what the share holds.

Log files mostly grow (TensorBoard event files, CSV and JSON lines): a file that grew since
its last copy gets only its new bytes, written at the same offset on the share. Whether it
only grew is checked, not assumed: the last few KiB before the old end must still read the
same (a hash kept from the last copy); anything else (a rewrite, a new inode, a shrink) is
copied whole into a temporary name on the share and renamed over the old copy, so a reader
there (TensorBoard) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TAIL_BYTES = 4096  # compared before appending: a rewrite of the file changes them
CHUNK_BYTES = 4 * 1024 * 1024  # one item of a copy call at most
TMP_PREFIX = ".twmirror-"  # the share-side temporary names (never "tfevents" in them)
LOCK_PREFIX = ".trainwatch-mirror"  # local bookkeeping, never copied
SCAN_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class LocalFile:
    rel: str
    size: int
    ino: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Copied:
    """What the share holds of one local file: its first ``size`` bytes as of ``mtime_ns``
    (-1 while only part of it was copied), ``tail`` the hash of the bytes before ``size``."""

    size: int
    ino: int
    mtime_ns: int
    tail: bytes


@dataclass(frozen=True, slots=True)
class Job:
    """One file to copy: from ``offset`` to ``file.size``; ``append`` writes in place."""

    file: LocalFile
    offset: int
    append: bool

    @property
    def length(self) -> int:
        return self.file.size - self.offset


def scan(local_dir: str, limit: int = SCAN_LIMIT) -> tuple[dict[str, LocalFile], bool]:
    """Regular files under ``local_dir`` (a local disk: read on our own thread), symlinks not
    followed; True as well when ``limit`` cut the listing short."""
    files: dict[str, LocalFile] = {}
    for root, dirs, names in os.walk(local_dir):
        dirs[:] = [d for d in dirs if not d.startswith(LOCK_PREFIX)]
        for name in names:
            if name.startswith(LOCK_PREFIX):
                continue
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    rel = os.path.relpath(path, local_dir)
                    files[rel] = LocalFile(rel, st.st_size, st.st_ino, st.st_mtime_ns)
                    if len(files) >= limit:
                        return files, True
    return files, False


def tail_hash(path: str, end: int) -> bytes:
    """Hash of the ``TAIL_BYTES`` bytes of a local file that end at ``end`` (b"" on error)."""
    start = max(0, end - TAIL_BYTES)
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
    except OSError:
        return b""
    if len(data) != end - start:
        return b""
    return hashlib.blake2b(data, digest_size=8).digest()


def plan(local_dir: str, files: dict[str, LocalFile], copied: dict[str, Copied]) -> list[Job]:
    """The copies that bring the share up to date, smallest first (many small logs land
    before one big file holds them up)."""
    jobs = []
    for rel, f in files.items():
        c = copied.get(rel)
        if c is not None and c.ino == f.ino:
            if c.size == f.size and c.mtime_ns == f.mtime_ns:
                continue
            grown = f.size > c.size
            if grown and c.tail == tail_hash(os.path.join(local_dir, rel), c.size):
                jobs.append(Job(f, c.size, append=True))
                continue
        jobs.append(Job(f, 0, append=False))
    jobs.sort(key=lambda j: j.length)
    return jobs


def pending_bytes(files: dict[str, LocalFile], copied: dict[str, Copied]) -> int:
    """Bytes the share lacks, as ``plan`` would copy them (without reading any file)."""
    total = 0
    for rel, f in files.items():
        c = copied.get(rel)
        if c is not None and c.ino == f.ino and c.size == f.size and c.mtime_ns == f.mtime_ns:
            continue
        grew = c is not None and c.ino == f.ino and f.size >= c.size
        total += f.size - c.size if grew and c is not None else f.size
    return total


def share_temp(share_dir: str, rel: str) -> str:
    digest = hashlib.sha1(rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(share_dir, os.path.dirname(rel), f"{TMP_PREFIX}{digest}.tmp")


def items(job: Job, local_dir: str, share_dir: str) -> Iterator[dict[str, Any]]:
    """The copy call's items for one job (core.worker.op_copy_ranges), in order."""
    src = os.path.join(local_dir, job.file.rel)
    dst = os.path.join(share_dir, job.file.rel)
    target = dst if job.append else share_temp(share_dir, job.file.rel)
    offset, end = job.offset, job.file.size
    first = True
    while first or offset < end:
        length = min(CHUNK_BYTES, end - offset)
        last = offset + length >= end
        item: dict[str, Any] = {"src": src, "dst": target, "offset": offset, "length": length}
        if first and not job.append:
            item["create"] = True
        if last:
            item["mtime_ns"] = job.file.mtime_ns
            if not job.append:
                item["rename_to"] = dst
        yield item
        offset += length
        first = False


def seed(
    local_dir: str, files: dict[str, LocalFile], share_files: dict[str, list[int]]
) -> dict[str, Copied]:
    """After a restart: files the share already holds whole (same size and modification
    time, which every finished copy sets) need no copy."""
    copied = {}
    for rel, (size, mtime_ns) in share_files.items():
        f = files.get(rel)
        if f is not None and f.size == size and f.mtime_ns == mtime_ns:
            copied[rel] = Copied(
                size, f.ino, mtime_ns, tail_hash(os.path.join(local_dir, rel), size)
            )
    return copied
