"""Which processes write into the watched paths: the kernel's fanotify, as root.

Why: a plain script that saves a checkpoint every few seconds holds each file open for a
few milliseconds; a discovery pass every 3 s almost never sees it in ``/proc/PID/fd``, so a
script with no TensorBoard and no GPU was never a run, and its end (Errno 28 on a full disk,
a SIGKILL, exit 0) was never told. fanotify reports every file closed after writing
(``FAN_CLOSE_WRITE``) on a marked mount with the writer's pid, however briefly it was open.

Only mounts of local, memory and overlay filesystems that answer are marked (their
mountpoints as the paths source resolved them: a dead network mount is never walked). Each
event carries a descriptor of the file, read back to its path with ``readlink`` and closed at
once; what lies outside the watched paths or in a hidden directory below one (``~/.cache``),
or is smaller than ``min_bytes`` (a source file an editor saved; the probe's 64 KiB file of
any watcher), is dropped. Needs CAP_SYS_ADMIN (root): elsewhere ``available`` is False and
the discovery finds writers by their open descriptors only (checkpoints, event files). Runs
on the discovery's own thread (``core.processes.source``), never a tick or an event loop;
~9 us of CPU a file closed on a marked mount, counted in the discovery's budget. The kernel
queues 16,384 events at most between two passes: past that (a very busy root filesystem)
some are dropped (``overflowed``). Layouts from linux/fanotify.h
(``fanotify_event_metadata``), parsed with ``struct``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
from collections.abc import Iterable, Mapping

from .. import hostfs
from ..defaults import DEFAULTS

log = logging.getLogger(__name__)

FAN_CLOEXEC, FAN_NONBLOCK = 0x1, 0x2  # FAN_CLASS_NOTIF is 0: notification only
FAN_MARK_ADD, FAN_MARK_REMOVE, FAN_MARK_MOUNT = 0x1, 0x2, 0x10
FAN_CLOSE_WRITE = 0x08
FAN_Q_OVERFLOW = 0x4000
AT_FDCWD = -100
METADATA = struct.Struct("=IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
METADATA_VERSION = 3
READ_BYTES = 65536
MAX_READS = DEFAULTS.write_watch_max_reads  # a bound on one take's work (events beyond wait)
MIN_BYTES = DEFAULTS.write_watch_min_bytes
MARKED_KINDS = ("local", "memory", "overlay")


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        libc.fanotify_mark.argtypes = [
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_char_p,
        ]
    except (OSError, AttributeError):
        return None
    return libc


def under(path: str, roots: Iterable[str]) -> str | None:
    """The watched root ``path`` lies in (the longest), or None."""
    best = None
    for root in roots:
        inside = path == root or path.startswith(root.rstrip("/") + "/")
        if inside and (best is None or len(root) > len(best)):
            best = root
    return best


def hidden_below(path: str, root: str) -> bool:
    """Whether ``path`` lies in a hidden directory (or is a hidden file) below ``root``: a
    browser's profile, pip's cache, an editor's swap file under a watched home directory
    are no run's writes; a run saves where its user looks."""
    rest = path[len(root) :].strip("/")
    return any(part.startswith(".") for part in rest.split("/") if part)


class WriteWatch:
    """``cover(paths)`` marks the mounts under the watched paths; ``take()`` returns the
    processes that closed a file of at least ``min_bytes`` they wrote under one of them
    since the last take (pid -> the watched paths), our own process excluded."""

    def __init__(self, min_bytes: int = MIN_BYTES) -> None:
        self.min_bytes = min_bytes
        self.fd: int | None = None
        self.available = True
        self.note: str | None = None
        self.overflowed = 0  # queue overflows seen (events the kernel dropped)
        self.roots: set[str] = set()
        self._marked: set[str] = set()
        self._libc = _libc()
        if self._libc is None or hostfs.current().procfs != "/proc":
            # another pid namespace's procfs (an agent in a container reading the host's):
            # the writers' pids fanotify gives are ours, not those the discovery reads
            self._off("no fanotify here" if self._libc is None else "a host procfs is read")

    def _off(self, why: str) -> None:
        self.available = False
        self.note = f"writers of the watched paths are found by their open files only ({why})"
        log.debug("trainwatch: %s", self.note)

    def _open(self) -> bool:
        if self.fd is not None:
            return True
        if not self.available or self._libc is None:
            return False
        # O_NONBLOCK: an event's descriptor is never one that waits (a FIFO, a lock)
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_LARGEFILE", 0)
        fd = self._libc.fanotify_init(FAN_CLOEXEC | FAN_NONBLOCK, flags)
        if fd < 0:
            code = ctypes.get_errno()
            self._off(f"fanotify: {os.strerror(code)}; it needs root")
            return False
        self.fd = fd
        return True

    def _mark(self, mountpoint: str, add: bool) -> bool:
        assert self._libc is not None and self.fd is not None
        flags = (FAN_MARK_ADD if add else FAN_MARK_REMOVE) | FAN_MARK_MOUNT
        if self._libc.fanotify_mark(self.fd, flags, FAN_CLOSE_WRITE, AT_FDCWD, mountpoint.encode()):
            code = ctypes.get_errno()
            if code not in (errno.ENOENT, errno.ENOTDIR):  # unmounted meanwhile: no more
                log.debug("trainwatch: fanotify_mark %s: %s", mountpoint, os.strerror(code))
            return False
        return True

    def cover(self, paths: Mapping[str, tuple[str | None, str]]) -> None:
        """Watch writes under ``paths`` (absolute path -> (its mountpoint, its kind), as
        the paths source resolved them; None for one that did not answer): mark the mounts
        of the local ones; unmark those no path needs any more."""
        roots = {os.path.normpath(p) for p in paths if p.startswith("/")}
        if not roots and self.fd is not None:  # the last path gone: no mount stays marked
            for gone in self._marked:
                self._mark(gone, add=False)
            self._marked = set()
        if not roots or not self._open():
            self.roots = roots
            return
        wanted = {m for m, kind in paths.values() if m and kind in MARKED_KINDS}
        for gone in self._marked - wanted:
            self._mark(gone, add=False)
        self._marked = (self._marked & wanted) | {
            m for m in wanted - self._marked if self._mark(m, add=True)
        }
        self.roots = roots

    def take(self) -> dict[int, set[str]]:
        """The writers since the last take: pid -> the watched roots they wrote under."""
        out: dict[int, set[str]] = {}
        if self.fd is None:
            return out
        me = os.getpid()
        for _ in range(MAX_READS):
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                log.debug("trainwatch: reading fanotify: %s", exc)
                break
            if not data:
                break
            self._events(data, me, out)
        return out

    def _events(self, data: bytes, me: int, out: dict[int, set[str]]) -> None:
        offset = 0
        while offset + METADATA.size <= len(data):
            length, version, _, _, mask, fd, pid = METADATA.unpack_from(data, offset)
            if length < METADATA.size or version != METADATA_VERSION:
                break
            offset += length
            if mask & FAN_Q_OVERFLOW:
                self.overflowed += 1
            if fd < 0:
                continue
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
                big = os.fstat(fd).st_size >= self.min_bytes
            except OSError:
                continue
            finally:
                os.close(fd)
            if not big:
                continue
            if pid == me:
                continue  # our own writes
            root = under(path, self.roots)
            if root is not None and not hidden_below(path, root):
                out.setdefault(pid, set()).add(root)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._marked.clear()
