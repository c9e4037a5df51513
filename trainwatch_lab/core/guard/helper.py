"""One helper process of the mount guard (core.guard.guard): started with ``subprocess.Popen``,
talked to over JSON lines on its pipes, one call at a time, abandoned when stuck. The
guard decides when; this module only knows how."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_PKG_PARENT = str(Path(__file__).resolve().parents[2])


class HelperTimeout(Exception):
    """No answer before the deadline (a slow start or a stuck call: see ``ready``)."""


class HelperDied(Exception):
    """The helper exited, or its pipes were closed: no answer will come."""


def worker_command() -> list[str]:
    """How a helper is started: the worker module, with this interpreter."""
    return [sys.executable, "-m", "trainwatch_lab.core.worker.main"]


def worker_env() -> dict[str, str]:
    """The helper's environment: this package importable, no interactive start-up file."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_PARENT, env.get("PYTHONPATH")) if p)
    env.pop("PYTHONSTARTUP", None)
    return env


class HelperProcess:
    """One helper process; one call at a time (the caller holds ``lock``)."""

    def __init__(self, key: str, lane: str) -> None:
        self.key, self.lane = key, lane
        self.lock = threading.Lock()
        self.until = 0.0  # when the call holding ``lock`` runs out of its own time
        self.proc = subprocess.Popen(
            worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # never the caller's stderr: a helper stuck for hours would hold it open, and
            # whoever reads our output through a pipe (``check | jq``) would wait as long
            stderr=subprocess.PIPE,
            bufsize=0,
            cwd="/",  # never start with a working directory on a mount that may hang
            env=worker_env(),
            start_new_session=True,  # a terminal's Ctrl-C is not meant for the helper
            close_fds=True,
        )
        self.ready = False
        self.dead = False
        self._buf = b""
        self._next_id = 0
        # The pipes are closed by close() only while no call uses them: a descriptor closed
        # under a read in flight fails with EBADF, or worse, is reused by another file that
        # the read then consumes. ``_io`` guards the two flags below.
        self._io = threading.Lock()
        self._busy = False  # a caller (holding ``lock``) is talking to the helper
        self._closing = False  # close() was called: the last user closes the pipes

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_line(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HelperTimeout
            try:
                fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
                readable, _, _ = select.select([fd], [], [], remaining)
                chunk = os.read(fd, 65536) if readable else None
            except (OSError, ValueError) as exc:  # the pipe was closed: no answer will come
                raise HelperDied from exc
            if chunk is None:
                raise HelperTimeout
            if not chunk:
                raise HelperDied
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        return msg if isinstance(msg, dict) else {}  # stray output: not an answer

    def request(self, op: str, args: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request and wait for its answer until ``deadline``.

        Raises ``HelperTimeout`` (check ``self.ready`` to tell a slow start from a stuck call) or
        ``HelperDied`` (the helper exited, or its pipes were closed: ValueError/EBADF become that
        too). Answers to requests abandoned while the helper was starting are skipped.
        """
        self._next_id += 1
        rid = self._next_id
        try:
            self.proc.stdin.write(  # type: ignore[union-attr]
                (json.dumps({"id": rid, "op": op, "args": args}) + "\n").encode()
            )
        except (OSError, ValueError) as exc:  # BrokenPipeError, or closed under us
            raise HelperDied from exc
        while True:
            msg = self._read_line(deadline)
            if msg.get("ready"):
                self.ready = True
            elif msg.get("id") == rid:
                return msg

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last line a dead helper wrote to stderr (why it died), without blocking;
        "" once the pipe is closed (the guard was closed meanwhile)."""
        data = b""
        with contextlib.suppress(OSError, ValueError):
            fd = self.proc.stderr.fileno()  # type: ignore[union-attr]
            while select.select([fd], [], [], 0.2)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data = (data + chunk)[-limit:]
        lines = data.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.send_signal(signum)

    def begin(self) -> bool:
        """Mark the pipes in use by the caller holding ``lock``; False when the helper was
        marked dead or closed meanwhile (nothing may be sent then). Always pair with end()."""
        with self._io:
            if self.dead or self._closing:
                return False
            self._busy = True
            return True

    def end(self) -> None:
        """The call is over: close the pipes now if close() came while it ran."""
        with self._io:
            self._busy = False
            if self._closing:
                self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]

    def close(self) -> None:
        """Ask the helper to leave (SIGTERM: a running probe still removes its file). A
        call in flight then reads its end (EOF) and closes the pipes itself."""
        self.dead = True
        self.signal(signal.SIGTERM)
        with self._io:
            self._closing = True
            if not self._busy:
                self._close_pipes()
        self.proc.poll()
