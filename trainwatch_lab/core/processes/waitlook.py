"""What a sleeping thread waits on, from procfs alone: the system call, and the file it names.

core.processes.waits looks ten times a second; this is one look. The call comes from
/proc/PID/task/TID/syscall (core.processes.threadwait decodes it), its file from the fd's link in
/proc/PID/fd or, for a call that takes a path (openat, statx, rename), from the caller's
memory through /proc/PID/mem. Link texts and memory only: never the file itself, so a dead
mount cannot block a look.
"""

from __future__ import annotations

import contextlib
import os

from .. import hostfs
from ..procfile import ProcFile
from .threadwait import AT_FDCWD, decode_call, read_c_string

Key = tuple[str | None, str]  # (the file slept on, or None: not storage; the system call)

NOT_STORAGE = ("/proc/", "/sys/", "/dev/")


def storage_file(link: str | None) -> str | None:
    """The file an fd link or a path argument names, when it is one that storage holds: not
    a pipe, socket or anon inode (``pipe:[123]``) and not a kernel or device file."""
    if not link or not link.startswith("/"):
        return None
    link = link.removesuffix(" (deleted)")
    if link.startswith(NOT_STORAGE) and not link.startswith("/dev/shm/"):
        return None
    return link


class Eyes:
    """The descriptors one sampling thread reads through; that thread closes them, so a
    stop never closes a descriptor under a read (its number could name another file)."""

    def __init__(self, pid: int) -> None:
        self.syscall = ProcFile(f"{hostfs.procfs()}/{pid}/task/{pid}/syscall")  # 10 reads a second
        self.mem: dict[int, int] = {}  # pid -> /proc/PID/mem descriptor
        self.links: dict[tuple[int, int], str] = {}  # (pid, fd) -> its last link seen

    def look(self, pid: int, text: bytes) -> Key | None:
        """What a thread whose syscall file reads ``text`` sleeps on; None while it runs."""
        call = decode_call(text.decode("ascii", "replace"))
        if call is None:
            return None
        file = None
        if call.fd is not None:
            file = self.link(pid, call.fd)
        elif call.path_at is not None:
            file = self.path_argument(pid, call.path_at, call.dirfd)
        return storage_file(file), call.name

    def link(self, pid: int, fd: int) -> str | None:
        """The fd's link text (never the file behind it). A descriptor being closed is out
        of the table already while ``close`` flushes it: the last link seen stands in."""
        try:
            link = os.readlink(f"{hostfs.procfs()}/{pid}/fd/{fd}")
        except OSError:
            return self.links.get((pid, fd))
        if len(self.links) > 4096:
            self.links.clear()
        self.links[(pid, fd)] = link
        return link

    def path_argument(self, pid: int, address: int, dirfd: int | None) -> str | None:
        fd = self.mem.get(pid)
        if fd is None:
            try:
                fd = self.mem[pid] = os.open(
                    f"{hostfs.procfs()}/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC
                )
            except OSError:
                return None
            if len(self.mem) > 8:  # workers come and go: keep few
                for old in [p for p in self.mem if p != pid][:-4]:
                    with contextlib.suppress(OSError):
                        os.close(self.mem.pop(old))
        path = read_c_string(fd, address)
        if not path or path.startswith("/"):
            return path
        base = None
        with contextlib.suppress(OSError):
            where = "cwd" if dirfd in (None, AT_FDCWD) else f"fd/{dirfd}"
            base = os.readlink(f"{hostfs.procfs()}/{pid}/{where}")
        return os.path.normpath(os.path.join(base, path)) if base else None

    def close(self) -> None:
        self.syscall.close()
        for fd in self.mem.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.mem.clear()
