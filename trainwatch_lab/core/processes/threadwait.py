"""Where this process's main thread is waiting: its Python frame and, from /proc, its kernel wait.

Why: when the GPU idles, "the training loop is blocked in event_file_writer.py:flush writing
/mnt/share/logs/events.out (fuse.sshfs)" is the answer the user needs. In a notebook kernel the
sampler runs in the same process as the training loop, so we can look at the main thread
directly: ``sys._current_frames()`` gives its frame, ``/proc/self/task/<tid>/`` its state
(``D`` = blocked in the kernel), ``wchan`` and the system call it is in, whose file descriptor
``/proc/self/fd/<fd>`` resolves to a path. Everything read here is procfs or interpreter memory,
never the filesystem the main thread may be stuck on, so this cannot block on a dead mount.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import threading
from dataclasses import dataclass
from typing import Any

from .. import hostfs
from ..model import Sample

# System calls that act on a file descriptor in their first argument, by architecture.
_FD_SYSCALLS: dict[str, dict[int, str]] = {
    "x86_64": {
        0: "read",
        1: "write",
        3: "close",
        17: "pread64",
        18: "pwrite64",
        19: "readv",
        20: "writev",
        5: "fstat",
        8: "lseek",
        40: "sendfile",
        72: "fcntl",
        73: "flock",
        74: "fsync",
        75: "fdatasync",
        77: "ftruncate",
        78: "getdents",
        138: "fstatfs",
        217: "getdents64",
        221: "fadvise64",
        277: "sync_file_range",
        285: "fallocate",
        295: "preadv",
        296: "pwritev",
        306: "syncfs",
        326: "copy_file_range",
        327: "preadv2",
        328: "pwritev2",
    },
    "aarch64": {
        25: "fcntl",
        32: "flock",
        44: "fstatfs",
        57: "close",
        46: "ftruncate",
        47: "fallocate",
        61: "getdents64",
        62: "lseek",
        63: "read",
        64: "write",
        65: "readv",
        66: "writev",
        67: "pread64",
        68: "pwrite64",
        69: "preadv",
        70: "pwritev",
        71: "sendfile",
        80: "fstat",
        82: "fsync",
        83: "fdatasync",
        84: "sync_file_range",
        223: "fadvise64",
        267: "syncfs",
        285: "copy_file_range",
        286: "preadv2",
        287: "pwritev2",
    },
}
_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}.get(
    platform.machine().lower(), platform.machine()
)

# System calls that name a file by a path argument: (name, index of the path argument,
# index of the directory fd it is relative to, or None: the working directory). A sleeping
# ``openat``/``statx``/``rename`` on a network share is a round trip like a write.
_PATH_SYSCALLS: dict[str, dict[int, tuple[str, int, int | None]]] = {
    "x86_64": {
        2: ("open", 0, None),
        4: ("stat", 0, None),
        6: ("lstat", 0, None),
        21: ("access", 0, None),
        76: ("truncate", 0, None),
        82: ("rename", 0, None),
        83: ("mkdir", 0, None),
        84: ("rmdir", 0, None),
        85: ("creat", 0, None),
        86: ("link", 0, None),
        87: ("unlink", 0, None),
        89: ("readlink", 0, None),
        90: ("chmod", 0, None),
        137: ("statfs", 0, None),
        257: ("openat", 1, 0),
        258: ("mkdirat", 1, 0),
        262: ("newfstatat", 1, 0),
        263: ("unlinkat", 1, 0),
        264: ("renameat", 1, 0),
        265: ("linkat", 1, 0),
        267: ("readlinkat", 1, 0),
        268: ("fchmodat", 1, 0),
        269: ("faccessat", 1, 0),
        316: ("renameat2", 1, 0),
        332: ("statx", 1, 0),
        437: ("openat2", 1, 0),
        439: ("faccessat2", 1, 0),
    },
    "aarch64": {
        34: ("mkdirat", 1, 0),
        35: ("unlinkat", 1, 0),
        37: ("linkat", 1, 0),
        38: ("renameat", 1, 0),
        43: ("statfs", 0, None),
        48: ("faccessat", 1, 0),
        53: ("fchmodat", 1, 0),
        56: ("openat", 1, 0),
        78: ("readlinkat", 1, 0),
        79: ("newfstatat", 1, 0),
        276: ("renameat2", 1, 0),
        291: ("statx", 1, 0),
        437: ("openat2", 1, 0),
        439: ("faccessat2", 1, 0),
    },
}
AT_FDCWD = -100


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def task_state(stat_text: str) -> str | None:
    """The state letter of a /proc/.../stat line (the command may contain spaces and ')')."""
    _, paren, tail = stat_text.rpartition(")")
    rest = tail.split() if paren else []
    return rest[0] if rest else None


def decode_syscall(text: str, machine: str = _MACHINE) -> tuple[str | None, int | None]:
    """(syscall name, fd) from /proc/.../syscall when the call works on a file descriptor."""
    parts = text.split()
    if not parts or not parts[0].lstrip("-").isdigit():
        return None, None  # "running", or unreadable
    nr = int(parts[0])
    name = _FD_SYSCALLS.get(machine, {}).get(nr)
    if name is None or len(parts) < 2:
        return (None if nr < 0 else f"syscall {nr}"), None
    try:
        return name, int(parts[1], 16)
    except ValueError:
        return name, None


# Where an idle kernel's (or server's) main thread waits for the next message: the selector
# of asyncio (ipykernel 6+) or of tornado/zmq (ipykernel 5), called by the loop itself.
_LOOP_CALLERS = ("asyncio/base_events.py", "/tornado/", "/zmq/")


def in_event_loop(frame: Any) -> bool:
    """Whether the main thread waits in the event loop for work (an idle notebook kernel), as
    opposed to user code waiting in a selector (a DataLoader polling its workers): the waiting
    frame is a selector's and its caller the loop's. Why: gpu-stalled fires only while the
    process is busy; a model kept in GPU memory by an idle kernel is no stall."""
    name = frame.f_code.co_filename.replace("\\", "/")
    if not (name.endswith("selectors.py") or "/zmq/" in name or "/tornado/" in name):
        return False
    caller = frame.f_back
    if caller is None:
        return False
    where = caller.f_code.co_filename.replace("\\", "/")
    return any(part in where for part in _LOOP_CALLERS)


@dataclass(frozen=True, slots=True)
class Call:
    """The system call a sleeping thread is in, and what names its file: ``fd``, or a path
    at ``path_at`` in the thread's memory, relative to ``dirfd`` (AT_FDCWD: the cwd)."""

    name: str
    fd: int | None = None
    path_at: int | None = None
    dirfd: int | None = None


NOT_IN_SYSCALL = Call("no system call")  # asleep outside one: a page fault, a stop


def _int32(word: str) -> int:
    """A C ``int`` argument from its register word in hex (AT_FDCWD is 0xff...ff9c)."""
    value = int(word, 16) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def decode_call(text: str, machine: str = _MACHINE) -> Call | None:
    """What /proc/.../syscall says a thread is in; None while it runs (or is runnable: the
    kernel answers "running" for any task not asleep) or when the text is unreadable."""
    parts = text.split()
    if not parts or not parts[0].lstrip("-").isdigit():
        return None
    nr = int(parts[0])
    if nr < 0:
        return NOT_IN_SYSCALL
    args = parts[1:7]
    try:
        name = _FD_SYSCALLS.get(machine, {}).get(nr)
        if name is not None:
            return Call(name, fd=_int32(args[0]))
        spec = _PATH_SYSCALLS.get(machine, {}).get(nr)
        if spec is not None:
            name, at, dirfd = spec
            return Call(
                name,
                path_at=int(args[at], 16),
                dirfd=None if dirfd is None else _int32(args[dirfd]),
            )
    except (IndexError, ValueError):
        pass
    return Call(name or f"syscall {nr}")


def read_c_string(fd: int, address: int, limit: int = 4096) -> str | None:
    """A NUL-terminated string at ``address`` of the process whose /proc/PID/mem ``fd`` is
    (its memory, never a file it names). Reads page by page: a string that ends near the end
    of a mapping must not make a read cross into an unmapped page."""
    data = b""
    while len(data) < limit:
        chunk = min(4096 - (address + len(data)) % 4096, limit - len(data))
        try:
            piece = os.pread(fd, chunk, address + len(data))
        except (OSError, OverflowError, ValueError):
            return None
        end = piece.find(b"\0")
        if end >= 0:
            return os.fsdecode(data + piece[:end])
        if not piece:
            return None
        data += piece
    return None


def main_thread_wait(proc_root: str = "/proc/self") -> dict[str, Any] | None:
    """Frame, kernel state and the file being written by the main thread, or ``None``."""
    main = threading.main_thread()
    if main is threading.current_thread():
        return None  # called on the main thread itself: nothing to learn
    frame = sys._current_frames().get(main.ident) if main.ident is not None else None
    info: dict[str, Any] = {"file": None, "line": None, "function": None, "idle_loop": False}
    if frame is not None:
        info["file"] = frame.f_code.co_filename
        info["line"] = frame.f_lineno
        info["function"] = frame.f_code.co_name
        info["idle_loop"] = in_event_loop(frame)
    del frame
    tid = main.native_id or os.getpid()
    task = f"{proc_root}/task/{tid}"
    stat = _read(f"{task}/stat")
    info["state"] = task_state(stat) if stat else None
    wchan = (_read(f"{task}/wchan") or "").strip()
    info["wchan"] = wchan if wchan and wchan != "0" else None
    syscall, fd = decode_syscall(_read(f"{task}/syscall") or "")
    info["syscall"] = syscall
    info["fd_path"] = None
    if fd is not None:
        with contextlib.suppress(OSError):
            info["fd_path"] = os.readlink(f"{proc_root}/fd/{fd}")
    return info


def task_wait(pid: int, proc: str | None = None) -> dict[str, Any] | None:
    """Where the main thread of another process waits, from procfs alone (no debugger, so no
    Python frame): its state letter, ``wchan``, the system call it is in and the path of that
    call's file descriptor; ``blocked`` when it sleeps uninterruptibly or in a call on a file
    descriptor (a FUSE or NFS wait is often interruptible: ``S`` in write or fsync). None when
    the process is gone. ``syscall`` needs ptrace access (same user, and Yama's ptrace_scope
    may still refuse it): then only state and wchan."""
    proc = proc or hostfs.current().procfs  # a host pid (core.hostfs)
    task = f"{proc}/{pid}/task/{pid}"
    stat = _read(f"{task}/stat")
    if stat is None:
        return None
    wchan = (_read(f"{task}/wchan") or "").strip()
    info: dict[str, Any] = {
        "state": task_state(stat),
        "wchan": wchan if wchan and wchan != "0" else None,
        "syscall": None,
        "fd_path": None,
        "blocked": False,
    }
    syscall, fd = decode_syscall(_read(f"{task}/syscall") or "")
    info["syscall"] = syscall
    info["blocked"] = info["state"] == "D" or fd is not None
    if fd is not None:
        with contextlib.suppress(OSError):  # the link's text: never the file behind it
            info["fd_path"] = os.readlink(f"{proc}/{pid}/fd/{fd}")
    return info


class MainThreadSource:
    """Sets ``sample.process.main_thread`` when the watched process is this one (a kernel
    watching itself); must run after the process source. Three small procfs reads.

    With ``gpu_idle_below`` it looks only while some GPU of the sample is below that
    utilization (then it must run after the GPU source too): the answer explains a stalled
    or starved GPU, and nothing reads it otherwise, so a busy or absent GPU costs nothing."""

    name = "main_thread"

    def __init__(self, gpu_idle_below: float | None = None) -> None:
        self.gpu_idle_below = gpu_idle_below

    def _wanted(self, sample: Sample) -> bool:
        if sample.process is None or sample.process.pid != os.getpid():
            return False
        limit = self.gpu_idle_below
        return limit is None or any(
            g.util_pct is not None and g.util_pct < limit for g in sample.gpus
        )

    def collect(self, sample: Sample) -> None:
        if not self._wanted(sample):
            return
        try:
            sample.process.main_thread = main_thread_wait()
        except Exception:  # never let introspection break a tick
            sample.process.main_thread = None
