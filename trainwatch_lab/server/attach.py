"""Kernels attach to the server's one sampler (issue 33): one watcher per machine and user.

A kernel started by this server finds, in ``TRAINWATCH_HUB``, the name of a Unix socket in
the abstract namespace (no file: nothing on a home directory that may sit on a share, no
path length limit, gone with the process) made of random bytes nobody can guess. Only a
process of the server's own user gets in: the kernel's uid is read from the socket itself
(``SO_PEERCRED``), which no client can forge; the REST API's rule, same user, same rights.

The protocol is one JSON object per line, at most ``MAX_LINE`` bytes.

- server -> kernel: ``{"hello": {"protocol", "interval", "probe", "pid"}}`` once, then
  ``{"sample": ...}`` after every tick, the panel's own JSON (``Hub.sample_json``): one
  sample, one set of warnings. A kernel that does not read is skipped (``MAX_PENDING``
  writes in flight at most): its socket costs a bounded buffer, never the server's memory.
  A kernel of this server's notebooks also gets ``{"clients": N}`` before a sample when N,
  the browsers (WebSocket connections) the server has open to it, changed: its dashboards
  stop drawing at 0 (notebook/dashboard/widget.py, ``unseen``).
- kernel -> server: ``{"paths": [...]}``, the paths it watches now (``%trainwatch``, the
  logdirs found after its cells), replacing what it sent before; ``{"tick": true}`` asks
  for a sample now (the end of a ``%%trainwatch`` cell); ``{"check": {"paths", "probe",
  "timeout"}}`` asks for ``trainwatch-lab check``'s report, answered ``{"checked": ...}``.
  A line that is not one of those gets ``{"error": "..."}`` and changes nothing.

The paths are watched with the role ``notebook:<kernel id>`` (``attached:<pid>`` for a
process that is no kernel of this server), so the panel lists each notebook's paths and
the recording keeps them; they go when the kernel disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from tornado.iostream import IOStream, StreamClosedError
from tornado.tcpserver import TCPServer

from ..core.attach.wire import (
    ENV,
    MAX_LINE,
    PROTOCOL,
    address,
    peer_credentials,
    runtime_name,
    same_user,
    socket_name,
)
from ..core.model import Sample
from ..core.paths.names import normalise
from .kernels import kernel_pid

MAX_PENDING = 2  # samples written to a kernel and not yet read by it
MAX_ATTACHED = 256  # kernels at once: each holds a descriptor and a place in every tick
TOO_MANY = b'{"error": "too many kernels attached: sample in the kernel"}\n'
MAX_PATH_CHARS = 4096
ROLE_PREFIX = "notebook:"

log = logging.getLogger(__name__)


def _listening(name: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address(name))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class BadLine(ValueError):
    """A line from a kernel that the protocol does not allow."""


def parse_line(line: bytes, max_paths: int) -> dict[str, Any]:
    """One kernel line, checked: ``{"paths": [absolute path, ...]}`` or ``{"tick": true}``."""
    try:
        message = json.loads(line)
    except ValueError:
        raise BadLine("not JSON") from None
    if not isinstance(message, dict) or len(message) != 1:
        raise BadLine('expected {"paths": [...]} or {"tick": true}')
    if "tick" in message:
        if message["tick"] is not True:
            raise BadLine("'tick' must be true")
        return message
    if "check" in message:
        return {"check": _check_request(message["check"], max_paths)}
    return {"paths": _absolute_paths(message.get("paths"), max_paths)}


def _absolute_paths(paths: Any, max_paths: int) -> list[str]:
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise BadLine("'paths' must be a list of strings")
    if len(paths) > max_paths:
        raise BadLine(f"at most {max_paths} paths")
    for p in paths:
        if not p.startswith("/") or len(p) > MAX_PATH_CHARS or "\0" in p:
            raise BadLine(f"not an absolute path: {p[:80]!r}")
    return [normalise(p) for p in paths]


def _check_request(request: Any, max_paths: int) -> dict[str, Any]:
    """``{"paths": [...], "probe": bool, "timeout": seconds or null}``, checked."""
    if not isinstance(request, dict) or set(request) - {"paths", "probe", "timeout"}:
        raise BadLine('expected {"check": {"paths": [...], "probe": bool, "timeout": s}}')
    paths = _absolute_paths(request.get("paths"), max_paths)
    if not paths:
        raise BadLine("'check' needs at least one path")
    probe, timeout = request.get("probe", True), request.get("timeout")
    if not isinstance(probe, bool):
        raise BadLine("'probe' must be true or false")
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if timeout is not None and not (number and 0.1 <= timeout <= 60):
        raise BadLine("'timeout' must be between 0.1 and 60 seconds")
    return {"paths": paths, "probe": probe, "timeout": timeout}


class Attached:
    """One kernel's connection."""

    def __init__(self, stream: IOStream, pid: int, role: str) -> None:
        self.stream, self.pid, self.role = stream, pid, role
        self.paths: list[str] = []
        self.pending = 0  # writes not yet flushed to the kernel
        self.skipped = 0  # samples it was not sent: it had not read the ones before
        self.clients: int | None = None  # browsers on its notebook, as last told (clients)

    def send(self, line: bytes) -> bool:
        """Write ``line`` unless the kernel has not read the last ones (False: skipped)."""
        if self.stream.closed():
            return False
        if self.pending >= MAX_PENDING:
            self.skipped += 1
            return False
        self.pending += 1
        future = self.stream.write(line)
        future.add_done_callback(self._flushed)
        return True

    def _flushed(self, future: asyncio.Future[None]) -> None:
        self.pending -= 1
        if not future.cancelled():
            future.exception()  # (a closed stream: seen by the reader)


class AttachServer(TCPServer):
    """The socket kernels attach to, on the server's event loop. ``hub`` is a server.hub.Hub."""

    def __init__(self, hub: Any, name: str | None = None, runtime_dir: str | None = None) -> None:
        """Listens on ``name`` (its kernels') and, given the server's ``runtime_dir``, on the
        name a terminal of the same user finds (``wire.runtime_name``), unless another
        server of that directory holds it."""
        super().__init__(max_buffer_size=MAX_LINE * 4)
        self.hub = hub
        self.name = name or socket_name()
        self.kernels: dict[int, Attached] = {}  # by id() of the connection
        self._unlisten: Callable[[], None] | None = None
        self.add_socket(_listening(self.name))
        self.found_as: str | None = None
        if runtime_dir is not None:
            try:
                self.add_socket(_listening(runtime_name(runtime_dir)))
                self.found_as = runtime_name(runtime_dir)
            except OSError as exc:  # another server of this runtime directory has it
                log.info("trainwatch: terminals will not find this server's sampler: %s", exc)

    # -- connections -------------------------------------------------------------------
    async def handle_stream(self, stream: IOStream, _address: Any) -> None:
        try:
            pid, uid = peer_credentials(stream.socket)  # type: ignore[arg-type]
        except OSError:
            stream.close()
            return
        if not same_user(uid):
            log.warning("trainwatch: refused an attach from pid %d (uid %d, not ours)", pid, uid)
            stream.close()
            return
        if len(self.kernels) >= MAX_ATTACHED:
            with contextlib.suppress(StreamClosedError):
                await stream.write(TOO_MANY)
            stream.close()
            return
        kernel = Attached(stream, pid, self._role_of(pid))
        # by connection, not by pid: a kernel that hangs up and comes back (a cell's own
        # sampler, then the next) must not lose its new connection to the old one's end
        self.kernels[id(kernel)] = kernel
        hello = {
            "hello": {
                "protocol": PROTOCOL,
                "interval": self.hub.config.interval,
                "probe": self.hub.config.probe,
                "pid": os.getpid(),
            }
        }
        kernel.send(json.dumps(hello).encode() + b"\n")
        if not self._unlisten:
            self._unlisten = self.hub.add_listener(self._on_sample)
        acquired = False
        try:
            await self.hub.acquire()  # an attached kernel holds the lease like a panel
            acquired = True
            await self._serve(kernel)
        finally:
            stream.close()
            del self.kernels[id(kernel)]
            if acquired:
                self.hub.release()
            if not self.kernels and self._unlisten is not None:
                self._unlisten()
                self._unlisten = None
            if kernel.paths:
                await self._sync_paths()

    async def _serve(self, kernel: Attached) -> None:
        max_paths = self.hub.defaults.max_watched_paths
        while True:
            try:
                line = await kernel.stream.read_until(b"\n", max_bytes=MAX_LINE)
            except StreamClosedError:
                return
            except Exception:  # UnsatisfiableReadError: a line over MAX_LINE
                return
            try:
                message = parse_line(line, max_paths)
            except BadLine as exc:
                kernel.send(json.dumps({"error": str(exc)}).encode() + b"\n")
                continue
            if "tick" in message:
                await self._tick_now()
            elif "check" in message:
                await self._check(kernel, **message["check"])
            elif message["paths"] != kernel.paths:
                kernel.paths = message["paths"]
                await self._sync_paths()

    def _role_of(self, pid: int) -> str:
        """``notebook:<kernel id>`` for a kernel of this server, else ``attached:<pid>``."""
        km = self.hub.kernel_manager
        for kid in list(km.list_kernel_ids()) if km is not None else ():
            with contextlib.suppress(KeyError):
                if kernel_pid(km.get_kernel(kid)) == pid:
                    return f"{ROLE_PREFIX}{kid}"
        return f"attached:{pid}"

    async def _sync_paths(self) -> None:
        """Every attached kernel's paths, watched with its role (off the loop: the paths
        source looks at the mount table when a path appears)."""
        for prefix in (ROLE_PREFIX, "attached:"):
            wanted = [
                (p, k.role)
                for k in self.kernels.values()
                if k.role.startswith(prefix)
                for p in k.paths
            ]
            await self.hub.in_executor(self.hub.paths.sync, prefix, wanted)

    async def _check(
        self, kernel: Attached, paths: list[str], probe: bool, timeout: float | None
    ) -> None:
        """``trainwatch-lab check`` by this server's guard (it knows the mounts that hang
        already), off the loop; the answer is written whatever the kernel has not read yet:
        it is what the client waits for."""
        from ..advice.check import check_budget_s, report_to_wire, run_check

        hub = self.hub
        limit = check_budget_s(timeout, hub.defaults)
        try:
            report = await hub.in_thread(
                lambda: run_check(paths, probe=probe, timeout=timeout, defaults=hub.defaults),
                timeout=limit,
            )
            answer: dict[str, Any] = {"checked": report_to_wire(report)}
        except Exception as exc:  # (TimeoutError included): said, never the connection
            answer = {"checked": {"error": f"{type(exc).__name__}: {exc}"}}
        with contextlib.suppress(StreamClosedError):
            await kernel.stream.write(json.dumps(answer).encode() + b"\n")

    async def _tick_now(self) -> None:
        sampler = self.hub.sampler
        if sampler is not None:
            await self.hub.in_executor(sampler.tick_now, self.hub.config.snapshot_wait_s)

    # -- samples -----------------------------------------------------------------------
    def _on_sample(self, sample: Sample, text: str) -> None:  # sampler thread
        line = b'{"sample":' + text.encode() + b"}\n"
        self.hub._on_loop(lambda: self._send_all(line))

    def _send_all(self, line: bytes) -> None:  # event loop
        for kernel in list(self.kernels.values()):
            self._tell_clients(kernel)
            kernel.send(line)

    def _tell_clients(self, kernel: Attached) -> None:
        """Tell a notebook's kernel how many browsers (WebSocket connections) this server
        has open to it, when that changed. Why: a dashboard drawing for a closed browser
        tab costs the kernel its charts, and this server the messages, which it keeps for
        a reconnect in a list with no bound (jupyter_server's ``start_buffering``); the
        kernel stops drawing at 0 and catches up when a browser comes back."""
        if not kernel.role.startswith(ROLE_PREFIX):
            return
        km = self.hub.kernel_manager
        try:
            clients = int(km.kernel_model(kernel.role.removeprefix(ROLE_PREFIX))["connections"])
        except Exception:  # gone meanwhile, or a manager without the count: say nothing
            return
        if clients != kernel.clients and kernel.send(
            json.dumps({"clients": clients}).encode() + b"\n"
        ):
            kernel.clients = clients

    def close(self) -> None:
        if os.environ.get(ENV) == self.name:  # kernels started from now on sample by themselves
            del os.environ[ENV]
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        self.stop()
        for kernel in list(self.kernels.values()):
            kernel.stream.close()
