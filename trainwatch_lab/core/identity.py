"""Which machine and which process namespace a process runs in, for the files that name
their writer (the mirror's share lock, a save's private directory): two containers often
share one hostname, and a pid means something only within one boot of one machine and one
pid namespace. A lock or a leftover is judged by its pid only when all three match."""

from __future__ import annotations

import hashlib
import os
import socket

BOOT_ID = "/proc/sys/kernel/random/boot_id"
PID_NS = "/proc/self/ns/pid"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists in this pid namespace (another user's counts: EPERM
    says it is there). The one test of a lock's, a leftover's or a probe file's writer."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except (OSError, ValueError):
        return ""


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def process_home() -> dict[str, str]:
    """This process's host name, boot id and pid namespace (empty strings where the
    system does not say)."""
    return {"host": socket.gethostname(), "boot": _read(BOOT_ID), "pidns": _link(PID_NS)}


def same_home(a: object, b: dict[str, str]) -> bool:
    """``a`` (a holder read from a file) runs where ``b`` does: same host, boot and pid
    namespace. A holder written without them (an older version) is not."""
    return isinstance(a, dict) and all(a.get(k) == v for k, v in b.items())


def home_tag(home: dict[str, str] | None = None) -> str:
    """Six hex digits naming ``home`` (default: this process's), for file names."""
    h = home if home is not None else process_home()
    key = "\0".join((h["host"], h["boot"], h["pidns"]))
    return hashlib.sha1(key.encode()).hexdigest()[:6]
