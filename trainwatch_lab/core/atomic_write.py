"""Replace a whole file so that readers see the old one or the new one, never half of one.

The one way every writer here replaces a file: the CSV export (through the helper), the
agent's file_sd target, the mirror's status and released log, the dashboard's preferences.
A hidden temporary file in the same directory (or ``tmp_dir``, a private one on the same
filesystem), fsynced when the file must survive a crash, then ``os.replace``. On any failure
(a full disk, a signal) the temporary file is removed; its name is chosen before the
``open`` so even a signal during the create can clean it up. A hidden file's temporary name
keeps its prefix, so a scan that skips the file's prefix (the mirror's) skips it too.
"""

from __future__ import annotations

import contextlib
import os
import secrets

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def temporary_name(path: str, tmp_dir: str | None = None) -> str:
    """Where ``path``'s next version is written before it replaces it."""
    directory, name = os.path.split(os.path.abspath(path))
    hidden = name if name.startswith(".") else f".{name}"
    where = directory if tmp_dir is None else tmp_dir
    return os.path.join(where, f"{hidden}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def write_atomically(
    path: str,
    data: bytes,
    *,
    mode: int = 0o666,
    durable: bool = True,
    tmp_dir: str | None = None,
) -> int:
    """Replace ``path`` by ``data`` (created ``mode`` less the umask: 0o666 for a file its
    user or another program reads, 0o600 for our own bookkeeping); ``durable`` fsyncs it
    first. Raises what the write raised, nothing left behind. Returns the bytes written."""
    tmp = temporary_name(path, tmp_dir)
    try:
        fd = os.open(tmp, _CREATE, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(data)
