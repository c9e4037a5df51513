"""A kernel's connection to its Jupyter server's sampler (server.attach has the protocol).

Connecting is a few system calls on an abstract socket (no file, nothing on a share), made
with a deadline; the server's identity is checked as the server checks ours (same user).
One thread reads the server's lines; the kernel's main thread never waits on the socket
longer than the deadline it gives. One link per kernel process (``shared_link``): every
dashboard of the notebook reads it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..model import Sample, sample_from_json
from .wire import ENV, MAX_LINE, PROTOCOL, address, peer_credentials, same_user

CONNECT_TIMEOUT_S = 1.0  # the hello included; a server this slow to answer is no help
SEND_TIMEOUT_S = 1  # a line to the server (paths, a tick): whole seconds (SO_SNDTIMEO)
log = logging.getLogger(__name__)

OnSample = Callable[[Sample], None]


class LinkError(OSError):
    """No server to attach to (gone, not ours, not answering): sample in this process."""


class HubLink:
    """One kernel's attachment: ``latest`` is the server's newest judged sample."""

    def __init__(self, name: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.name = name
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address(name))
            server_pid, uid = peer_credentials(sock)
            if not same_user(uid):
                raise LinkError(f"the socket {name} belongs to uid {uid}, not to us")
            self._file = sock.makefile("rb")
            hello = json.loads(self._file.readline(MAX_LINE) or b"{}").get("hello")
            if not isinstance(hello, dict):
                raise LinkError("the server did not say hello")
            if hello.get("protocol") != PROTOCOL:
                raise LinkError(f"the server speaks protocol {hello.get('protocol')!r}, not ours")
        except (OSError, ValueError, AttributeError) as exc:
            sock.close()
            raise exc if isinstance(exc, LinkError) else LinkError(str(exc)) from exc
        # reads wait as long as the server is quiet (the reader thread); a send that cannot
        # go out within SEND_TIMEOUT_S (a server that stopped reading) ends the link instead
        # of holding the kernel's main thread
        sock.settimeout(None)
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(SEND_TIMEOUT_S), 0)
        )
        self._sock = sock
        self.server_pid = server_pid
        self.interval = float(hello.get("interval") or 1.0)
        self.probe = bool(hello.get("probe", True))  # the server probes its paths
        self.latest: Sample | None = None
        # browsers the server has open to this kernel's notebook; None: not told (a kernel
        # of another server, a terminal, a server that does not count them)
        self.clients: int | None = None
        self.closed = False
        self._cond = threading.Condition()
        self._send_lock = threading.RLock()
        self._wanted: dict[int, list[str]] = {}  # id(owner) -> its paths (see watch)
        self._subscribers: list[OnSample] = []
        self._answers: list[Any] = []  # the server's answers to ``check``, in order
        self._asked = 0  # checks sent and not yet taken: an error line then answers one
        self._thread = threading.Thread(target=self._read, name="trainwatch-attach", daemon=True)
        self._thread.start()

    # -- from the server ---------------------------------------------------------------
    def _read(self) -> None:
        try:
            for line in self._file:
                try:
                    data = json.loads(line)
                    sample = sample_from_json(data["sample"]) if "sample" in data else None
                except Exception:  # another version's sample: skipped, never the thread
                    log.debug("trainwatch: a line from the server was not understood")
                    continue
                if sample is None:
                    if isinstance(data.get("clients"), int):
                        self.clients = data["clients"]
                    elif "checked" in data:  # the answer to ``check``
                        with self._cond:
                            self._answers.append(data["checked"])
                            self._cond.notify_all()
                    elif "error" in data:
                        with self._cond:
                            if self._asked > len(self._answers):  # it refused our check
                                self._answers.append({"error": str(data["error"])})
                                self._cond.notify_all()
                                continue
                        log.warning("trainwatch: the Jupyter server said: %s", data["error"])
                    continue
                with self._cond:
                    self.latest = sample
                    self._cond.notify_all()
                for callback in list(self._subscribers):
                    try:
                        callback(sample)
                    except Exception:
                        log.exception("trainwatch: attach subscriber failed")
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def subscribe(self, callback: OnSample) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def fresh(self, after: float, timeout: float) -> Sample | None:
        """Ask the server for a sample now; the first one taken after ``after`` (time.time)
        within ``timeout`` s, else None (the caller keeps ``latest``)."""
        if not self._send({"tick": True}):
            return None
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.closed:
                if self.latest is not None and self.latest.t >= after:
                    return self.latest
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    return None
        return None

    def check(
        self, paths: Sequence[str], probe: bool, timeout: float | None, wait: float
    ) -> Any | None:
        """The server's one-shot check of ``paths`` (``trainwatch-lab check``), by its own
        guard, which knows the mounts that hang already; its JSON, or None when no answer
        came within ``wait`` s (the link then ends: a late answer must not be taken for the
        next one's)."""
        request = {"paths": list(paths), "probe": probe, "timeout": timeout}
        with self._cond:
            self._asked += 1
        if not self._send({"check": request}):
            return None
        deadline = time.monotonic() + wait
        with self._cond:
            while not self._answers:
                left = deadline - time.monotonic()
                if self.closed or left <= 0 or not self._cond.wait(left):
                    break
            if self._answers:
                self._asked -= 1
                return self._answers.pop(0)
        self.close()
        return None

    # -- to the server -----------------------------------------------------------------
    def watch(self, owner: object, paths: Sequence[str]) -> bool:
        """The paths ``owner`` (one dashboard of this kernel) watches now; the server hears
        every owner's together, replacing what it heard before."""
        with self._send_lock:  # (held while sending: the server hears the lists in order)
            self._wanted[id(owner)] = list(paths)
            union = list(dict.fromkeys(p for ps in self._wanted.values() for p in ps))
            return self._send({"paths": union})

    def serves(self, interval: float, probe: bool) -> bool:
        """Whether the server's sampler is the one a dashboard asked for: its interval, and
        no probes where the user said ``--no-probe``."""
        return math.isclose(interval, self.interval) and (probe or not self.probe)

    def release_unused(self) -> None:
        """Hang up unless a dashboard reads the link (it holds the server's sampler running)."""
        with self._send_lock:
            if self._wanted:
                return
        self.close()

    def leave(self, owner: object) -> None:
        """``owner`` is done. The last one to leave hangs up: an attached kernel holds the
        server's sampler running, so a kernel that watches nothing any more must not."""
        with self._send_lock:
            if self._wanted.pop(id(owner), None) is None:
                return
            if self._wanted:
                union = list(dict.fromkeys(p for ps in self._wanted.values() for p in ps))
                self._send({"paths": union})
                return
        self.close()

    def _send(self, message: dict[str, object]) -> bool:
        if self.closed:
            return False
        try:
            with self._send_lock:
                self._sock.sendall(json.dumps(message).encode() + b"\n")
            return True
        except OSError:  # gone, or not reading: a line may be half sent, so the link ends
            self.close()
            return False

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # (the reader thread sees the end)
        self._sock.close()
        with contextlib.suppress(OSError, ValueError):
            self._file.close()


_shared: HubLink | None = None
_shared_lock = threading.Lock()


def shared_link(env: dict[str, str] | None = None) -> HubLink | None:
    """This process's link to the server named in ``TRAINWATCH_HUB`` (made on first use,
    made again after the server went away and came back); None with no server to attach
    to: then the kernel samples by itself (VS Code, plain IPython, a remote kernel)."""
    global _shared
    name = (os.environ if env is None else env).get(ENV)
    with _shared_lock:
        if _shared is not None and not _shared.closed and _shared.name == name:
            return _shared
        _shared = None
        if not name:
            return None
        try:
            _shared = HubLink(name)
        except LinkError as exc:
            log.info("trainwatch: not attached to the Jupyter server (%s)", exc)
            return None
        return _shared
