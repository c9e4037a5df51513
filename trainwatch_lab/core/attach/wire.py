"""What the server's attach socket and a kernel's link agree on: the environment variable
that names the socket, its abstract address, the line limit, and who may be at the other end.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import struct
from collections.abc import Mapping

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


def runtime_dir(env: Mapping[str, str] | None = None) -> str:
    """Jupyter's runtime directory as jupyter_core finds it on Linux (the servers a user
    runs list themselves there), worked out from the environment alone: no file is read."""
    env = os.environ if env is None else env
    if env.get("JUPYTER_RUNTIME_DIR"):
        return env["JUPYTER_RUNTIME_DIR"]
    data = env.get("JUPYTER_DATA_DIR")
    if not data:
        xdg = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        data = os.path.join(xdg, "jupyter")
    return os.path.join(data, "runtime")


def runtime_name(directory: str) -> str:
    """The name a server also listens on, found by a terminal of the same user: a command
    (``trainwatch-lab watch``) finds the server of its runtime directory, as ``jupyter server
    list`` does, without reading anything there."""
    digest = hashlib.sha256(os.path.abspath(directory).encode()).hexdigest()[:16]
    return f"@trainwatch-{os.getuid()}-rt-{digest}"
