"""The helper process that does every call which can touch a mount.

Run as ``python -m trainwatch_lab.core.worker.main`` by core.guard.guard, one per mount. It reads
one JSON request per line on stdin and answers one JSON line on stdout. Why a separate process:
a ``statvfs`` on a network mount whose server stopped answering sleeps uninterruptibly; a
thread stuck like that can never be reclaimed, and a process with such a thread cannot even
exit. A helper process can at least be abandoned while the caller carries on.

Each request names a lane; each lane's requests run in order on a thread of their own, so a
two-second probe never delays the per-tick statvfs on the same mount, and one process serves
them all (one per mount, not one per mount and lane). Answers carry the request's id.

The operations live in core.worker.ops (looks at a mount), core.worker.files (user files for
fix/ and the export) and core.worker.saves (checkpoint saves); each module is imported on its
first call, so a helper that only looks at a mount never loads the others. This module is the
protocol.

Protocol: on start the worker writes ``{"ready": true, "pid": N}``; then for each
``{"id": I, "lane": L, "op": NAME, "args": {...}}`` (lane "main" when left out) it writes
``{"id": I, "ok": true, "result": ...}`` or
``{"id": I, "ok": false, "error": {"type", "errno", "strerror", "filename", "message"}}``.
It exits on EOF (once the calls in flight answered), SIGTERM or SIGINT; the latter two raise
SystemExit inside every running operation (``_stop``), so a probe's ``finally`` still removes
its temporary file and a save its partial copy.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from queue import SimpleQueue
from typing import Any

from .. import hostfs
from .ops import error_fields  # every helper looks at its mount: ops is always needed

MAIN_LANE = "main"

# op name -> "module:function" under core.worker, imported on first use
OPS: dict[str, str] = {
    "ping": "ops:op_ping",
    "sleep": "ops:op_sleep",
    "statvfs": "ops:op_statvfs",
    "inspect": "ops:op_inspect",
    "scan_checkpoints": "ops:op_scan_checkpoints",
    "written_since": "ops:op_written_since",
    "file_sizes": "ops:op_file_sizes",
    "probe": "ops:op_probe",
    "clean_leftovers": "ops:op_clean_leftovers",
    "quota": "ops:op_quota",
    "write_text": "files:op_write_text",
    "copy_ranges": "files:op_copy_ranges",
    "tree": "files:op_tree",
    "digests": "files:op_digests",
    "claim_share": "files:op_claim_share",
    "release_share": "files:op_release_share",
    "saves": "saves:op_saves",
    "commit": "saves:op_commit",
    "remove": "saves:op_remove",
    "make_partial": "saves:op_make_partial",
    "copy_in": "saves:op_copy_in",
    "discard_partials": "saves:op_discard_partials",
    "tree_bytes": "saves:tree_bytes",
}


def operation(name: str) -> Callable[..., Any]:
    """The function behind op ``name`` (KeyError for an unknown one), its module loaded now."""
    module, function = OPS[name].split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)


def handle(line: str) -> dict[str, Any]:
    rid = None
    try:
        req = json.loads(line)
        rid = req.get("id")
        fn = operation(req["op"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return {"id": rid, "ok": False, "error": {"type": "BadRequest", "message": repr(exc)}}
    try:
        # paths under a host's rootfs resolved inside it (core.hostfs), here where a look
        # at the filesystem may hang
        args = hostfs.resolved_args(req.get("args", {}))
        return {"id": rid, "ok": True, "result": fn(**args)}
    except Exception as exc:  # reported to the caller, the worker stays up
        return {"id": rid, "ok": False, "error": error_fields(exc)}


def lane_of(line: str) -> str:
    """The lane a request line asks for; a line that is no request goes to the main lane,
    which answers it with BadRequest."""
    try:
        lane = json.loads(line).get("lane")
    except (ValueError, AttributeError):
        return MAIN_LANE
    return lane if isinstance(lane, str) and lane else MAIN_LANE


class _Answers:
    """stdout, shared by the lanes: one whole line at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def write(self, msg: dict[str, Any]) -> None:
        data = memoryview((json.dumps(msg) + "\n").encode())
        with self._lock:
            try:
                while data:
                    data = data[os.write(1, data) :]
            except OSError:
                pass  # the guard is gone: EOF on stdin ends us


class _Lane(threading.Thread):
    """One lane: its requests in order, on this thread."""

    def __init__(self, name: str, state: _State) -> None:
        super().__init__(name=f"lane {name}", daemon=True)
        self.requests: SimpleQueue[str | None] = SimpleQueue()
        self.running = False  # an operation runs now (``_State.lock``)
        self._state = state

    def run(self) -> None:
        state = self._state
        try:
            while (line := self.requests.get()) is not None:
                with state.lock:
                    if state.stopping:
                        return
                    self.running = True
                try:
                    answer = handle(line)
                finally:
                    with state.lock:
                        self.running = False
                state.answers.write(answer)
        except BaseException:  # SystemExit from _stop: the operation cleaned up
            return


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = False
        self.interrupted = False  # told to leave: a second signal changes nothing
        self.lanes: dict[str, _Lane] = {}
        self.answers = _Answers()

    def dispatch(self, line: str) -> None:
        name = lane_of(line)
        lane = self.lanes.get(name)
        if lane is None:
            lane = self.lanes[name] = _Lane(name, self)
            lane.start()
        lane.requests.put(line)

    def stop(self, interrupt: bool) -> None:
        """No new operation starts; ``interrupt``: the running ones get SystemExit (as a
        signal raised it in a single-threaded helper) and clean up; then wait for them."""
        with self.lock:
            self.stopping = True
            self.interrupted = self.interrupted or interrupt
            busy = [lane for lane in self.lanes.values() if lane.running]
        for lane in self.lanes.values():
            lane.requests.put(None)
        if interrupt and busy:
            import ctypes  # only here: a helper that is never told to leave never loads it

            for lane in busy:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(lane.ident or 0), ctypes.py_object(SystemExit)
                )
        for lane in busy:
            lane.join()


_state: _State | None = None


def _terminate(signum: int, frame: object) -> None:
    if _state is not None and _state.interrupted:
        return  # already leaving: let the operations finish their cleanup
    raise SystemExit(128 + signum)


def _lines(wakeup: int) -> Iterator[str]:
    """stdin's lines. A signal that lands on a lane's thread only writes to ``wakeup``:
    select returns, and the main thread runs the handler (_terminate)."""
    buf = b""
    while True:
        readable, _, _ = select.select([0, wakeup], [], [])
        if wakeup in readable:
            while True:
                try:
                    if not os.read(wakeup, 512):
                        break
                except BlockingIOError:
                    break
        if 0 not in readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield line.decode(errors="replace")


def main() -> int:
    global _state
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    state = _state = _State()
    state.answers.write({"ready": True, "pid": os.getpid()})
    # Start-up errors went to the guard through stderr; from now on errors travel in the
    # answers, and stray output (warnings) must not fill a pipe nobody reads until we die.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        for line in _lines(wake_r):
            state.dispatch(line)
        state.stop(interrupt=False)  # EOF: the calls in flight answer first
    except (SystemExit, KeyboardInterrupt):
        state.stop(interrupt=True)
        raise
    return 0


if __name__ == "__main__":
    with contextlib.suppress(SystemExit, KeyboardInterrupt, BrokenPipeError):
        sys.exit(main())
    os._exit(0)  # parent gone or told us to stop: nothing left to report
