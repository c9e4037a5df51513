"""One helper process of the mount guard (core.guard.guard): started with ``subprocess.Popen``,
talked to over JSON lines on its pipes, one call at a time per lane (the lanes of one mount
run side by side in its one process: core.worker.main), abandoned when stuck. The guard
decides when; this module only knows how."""

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


class Lane:
    """One lane of a helper: one call at a time (the caller holds ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.until = 0.0  # when the call holding ``lock`` runs out of its own time


class HelperProcess:
    """One helper process (per mount); its lanes answer side by side, tagged by request id.

    Several callers may wait at once: whoever finds nobody reading reads the pipe for all
    (until its own deadline) and hands each answer to its caller (``_answers``)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.lanes: dict[str, Lane] = {}
        self.verdict: Any = None  # set by the guard when it abandons this helper
        # (op, timeout_s, since) of the call its mount did not answer, when abandoned for it
        self.gave_up: tuple[str, float, float] | None = None
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
        self._write = threading.Lock()
        # answers read by one caller for the others: ``_cond`` guards the three below
        self._cond = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self._waiting: set[int] = set()
        self._reading = False  # a caller reads the pipe now
        self._gone = False  # the pipe said EOF (or was closed), or stop() came
        self._wake_r, self._wake_w = os.pipe()  # stop() wakes the caller reading the pipe
        # The pipes are closed by close() only while no call uses them: a descriptor closed
        # under a read in flight fails with EBADF, or worse, is reused by another file that
        # the read then consumes. ``_io`` guards the two fields below.
        self._io = threading.Lock()
        self._busy: dict[str, int] = {}  # lanes whose caller talks to the helper now
        self._closing = False  # close() was called: the last user closes the pipes
        self._pipes_closed = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lane(self, name: str) -> Lane:
        with self._io:
            lane = self.lanes.get(name)
            if lane is None:
                lane = self.lanes[name] = Lane()
            return lane

    def busy_lanes(self) -> set[str]:
        """The lanes with a call in flight now."""
        with self._io:
            return {name for name, n in self._busy.items() if n}

    def _read_line(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HelperTimeout
            try:
                fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
                readable, _, _ = select.select([fd, self._wake_r], [], [], remaining)
                if self._wake_r in readable:
                    raise HelperDied  # stop(): the guard gave this helper up
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

    def request(
        self, op: str, args: dict[str, Any], deadline: float, lane: str = "main"
    ) -> dict[str, Any]:
        """Send one request on ``lane`` and wait for its answer until ``deadline``.

        Raises ``HelperTimeout`` (check ``self.ready`` to tell a slow start from a stuck call) or
        ``HelperDied`` (the helper exited, or its pipes were closed: ValueError/EBADF become that
        too). Answers to requests given up (timed out) are skipped.
        """
        line = {"op": op, "lane": lane, "args": args}
        with self._write:
            self._next_id += 1
            rid = line["id"] = self._next_id
            with self._cond:
                self._waiting.add(rid)
            try:
                self.proc.stdin.write((json.dumps(line) + "\n").encode())  # type: ignore[union-attr]
            except (OSError, ValueError) as exc:  # BrokenPipeError, or closed under us
                with self._cond:
                    self._waiting.discard(rid)
                raise HelperDied from exc
        with self._cond:
            try:
                return self._await(rid, deadline)
            finally:
                self._waiting.discard(rid)
                self._answers.pop(rid, None)

    def _await(self, rid: int, deadline: float) -> dict[str, Any]:
        """The answer to ``rid``: read by this caller, or by the one reading for all now.
        Holds ``_cond`` (released while reading and waiting)."""
        while rid not in self._answers:
            if self._gone:
                raise HelperDied
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HelperTimeout
            if self._reading:
                self._cond.wait(remaining)
                continue
            self._reading = True
            self._cond.release()
            try:
                msg = self._read_line(deadline)
            except HelperDied:
                self._cond.acquire()
                self._gone = True
                raise
            except BaseException:
                self._cond.acquire()
                raise
            else:
                self._cond.acquire()
            finally:
                self._reading = False
                self._cond.notify_all()
            if msg.get("ready"):
                self.ready = True
            elif msg.get("id") in self._waiting:
                self._answers[msg["id"]] = msg
        return self._answers.pop(rid)

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

    def begin(self, lane: str = "main") -> bool:
        """Mark the pipes in use by the caller holding ``lane``'s lock; False when the helper
        was marked dead or closed meanwhile (nothing may be sent then). Always pair with
        end()."""
        with self._io:
            if self.dead or self._closing:
                return False
            self._busy[lane] = self._busy.get(lane, 0) + 1
            return True

    def end(self, lane: str = "main") -> None:
        """The call is over: close the pipes now if close() came while no other ran."""
        with self._io:
            self._busy[lane] -= 1
            if self._closing and not any(self._busy.values()):
                self._close_pipes()

    def _close_pipes(self) -> None:
        """Once only (caller holds ``_io``): a descriptor number closed twice may by then
        name somebody else's file."""
        if self._pipes_closed:
            return
        self._pipes_closed = True
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def stop(self) -> None:
        """Given up (a call on it ran out of time; the guard signals it): every call still
        waiting for an answer ends now with HelperDied instead of at its own deadline."""
        with self._cond:
            self._gone = True
            self._cond.notify_all()
        with self._io:
            if not self._pipes_closed:
                os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Ask the helper to leave (SIGTERM: a running probe still removes its file). A
        call in flight then reads its end (EOF) and closes the pipes itself."""
        self.dead = True
        self.signal(signal.SIGTERM)
        with self._io:
            self._closing = True
            if not any(self._busy.values()):
                self._close_pipes()
        self.proc.poll()
