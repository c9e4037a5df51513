"""Small /proc files read through descriptors kept open from one tick to the next.

Why: the sampler sleeps a second between ticks, so every tick runs cold, and a cold
open + read + close of a /proc file costs about three times a ``pread`` on a descriptor that
is already open (the path walk and the file setup are most of it). /proc regenerates a file's
text on every read from offset 0, so a kept descriptor always reads fresh values. A kept
descriptor of /proc/PID/... belongs to that process for good: once it is gone, reads fail
with ESRCH instead of silently describing a new process that reused the PID.

Everything here reads procfs only, never a mount that may hang.
"""

from __future__ import annotations

import contextlib
import os
import threading

CHUNK = 65536
# A /proc seq_file read stops short of the end only when its page-sized buffer is full; a
# read shorter than this is therefore the whole rest of the file (no extra read for EOF).
SURELY_LAST = 2048


class ProcFile:
    """One /proc file, opened on first read and kept open."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def _read_fd(self, fd: int) -> bytes:
        chunks: list[bytes] = []
        offset = 0
        while True:
            chunk = os.pread(fd, CHUNK, offset)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            if len(chunk) < SURELY_LAST:
                return b"".join(chunks)
            offset += len(chunk)

    def read(self) -> bytes:
        """The file's current text. Raises OSError like ``open`` would (FileNotFoundError
        for a process that is gone); a kept descriptor that fails is reopened once, since the
        PID may now name a new process."""
        return self.read_fresh()[0]

    def read_fresh(self) -> tuple[bytes, bool]:
        """The file's current text, and whether this read had to open it (first read, or the
        kept descriptor failed: the PID may belong to a new process now)."""
        if self._fd is not None:
            try:
                return self._read_fd(self._fd), False
            except OSError:
                self.close()
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = self._read_fd(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        return data, True

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:  # a source dropped without close() must not leak its fd
        self.close()


class ProcFiles:
    """A set of kept /proc files, keyed by path. Files not read since the last ``sweep`` are
    closed by it, so descriptors follow the processes still around. At most ``limit`` are
    kept (the descriptors count against the user's open-file limit, and forked workers
    inherit them); beyond that, and once closed, files are opened for each read."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self._files: dict[str, ProcFile] = {}
        self._used: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()

    def read(self, path: str) -> bytes:
        return self.read_fresh(path)[0]

    def read_fresh(self, path: str) -> tuple[bytes, bool]:
        """See ``ProcFile.read_fresh``."""
        with self._lock:
            file = self._files.get(path)
            if file is None:
                if self._closed or len(self._files) >= self.limit:
                    return read_once(path), True
                file = self._files[path] = ProcFile(path)
            self._used.add(path)
            return file.read_fresh()

    def sweep(self) -> None:
        with self._lock:
            stale = [p for p in self._files if p not in self._used]
            closing = [self._files.pop(p) for p in stale]
            self._used = set()
        for file in closing:
            file.close()

    def __len__(self) -> int:
        return len(self._files)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            files, self._files = list(self._files.values()), {}
        for file in files:
            file.close()


def read_once(path: str) -> bytes:
    """Open, read, close: for a file read once, or where nothing is kept."""
    with open(path, "rb") as f:
        return f.read()
