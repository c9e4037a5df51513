"""What the server's attach socket and a kernel's link agree on: the environment variable
that names the socket, its abstract address, the line limit, and who may be at the other end.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct

ENV = "TRAINWATCH_HUB"  # the socket's name, in every kernel the server starts
PROTOCOL = 1  # the server's hello says it; a kernel that speaks another samples by itself
MAX_LINE = 64 * 1024  # a kernel's line (its paths); the server's samples are not bounded by it


def socket_name() -> str:
    """A fresh abstract socket name, unguessable ('@' stands for the leading NUL, as
    ``ss -x`` shows it): no file on a home directory that may sit on a share, no path length
    limit, gone with the process."""
    return f"@trainwatch-{os.getuid()}-{secrets.token_hex(12)}"


def address(name: str) -> str:
    """The address ``bind``/``connect`` take for ``name``."""
    return "\0" + name[1:] if name.startswith("@") else name


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end, from the kernel: nobody can forge it."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


def same_user(uid: int) -> bool:
    """The rule of both ends: only a process of our own user (the REST API's rule)."""
    return uid == os.getuid()
