"""The fleet's listing built in a process of its own: ask Prometheus, decode its answers, fold
them, encode the reply.

Why a process and not a thread: at 10,000 hosts decoding, folding and encoding are a second
of pure Python, and a thread doing it holds the GIL the event loop needs (the benchmark saw
the loop late by 0.4-1 s with the work on a worker thread). A process shares no GIL; the
server's side only writes the answers' bytes to a pipe and reads the reply's, on a thread
of its own (pipe I/O lets the GIL go).

One worker process, started on the first listing, kept for the next ones, started again if
it dies (that listing fails with one line). A plain ``python -c`` child rather than
multiprocessing's spawn, which re-imports the server's ``__main__`` (a script without a main
guard starts servers recursively). It imports this module only: no Jupyter, no hub. Frames
on its stdin and stdout: an 8-byte length, then a pickle (our own process at both ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import struct
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from ...core.defaults import DEFAULTS, Defaults
from ...core.model import dumps
from ...prometheus.fleet import FIXES, Series, counts, fold, seen_query
from .promclient import Answer, data, result
from .promfetch import Endpoint, query_all

FRAME = struct.Struct("<Q")
ROOT = str(Path(__file__).resolve().parents[3])  # where this trainwatch_lab is imported from
CHILD = (
    f"import sys; sys.path.insert(0, {ROOT!r}); "
    "from trainwatch_lab.server.fleet.listing import serve; serve()"
)


class WorkerDied(Exception):
    """The worker process ended in the middle of a listing (killed, out of memory)."""


def listing(
    where: Endpoint,
    queries: Mapping[str, str],
    at: float,
    recorded: bool,
    d: Defaults,
    lane: Executor | None = None,
) -> bytes:
    """The body of ``GET fleet`` (in the worker process): the listing's ``queries`` asked at
    ``at`` and answered within ``where.timeout_s`` from now (a worker slow to take the
    listing is not Prometheus being slow), then a second round for the targets absent now
    (``seen_query``), folded (on ``lane`` when given: the worker's nicer thread).
    ``recorded``: every per-host series was read from the recording rules. Prometheus down,
    slow, refusing or foreign raises its one line."""
    answers = asked(where, queries, at, time.monotonic() + where.timeout_s)
    args = (answers, where.url, at, recorded, d)
    return encoded(*args) if lane is None else lane.submit(encoded, *args).result()


def asked(
    where: Endpoint, queries: Mapping[str, str], at: float, deadline: float
) -> dict[str, Answer]:
    """The listing's answers, undecoded; a refused or foreign one raises its one line."""
    answers = query_all(where, queries, at, deadline)
    seen = seen_query(result(answers["absent"]))  # a few series
    if seen is not None:  # the targets down or gone: when each last answered
        answers |= query_all(where, {"seen": seen}, at, deadline)
    for answer in answers.values():
        if answer.code != 200 or not answer.json:
            data(answer)  # refused, or not the API: its one line, before any fold
    return answers


def encoded(
    answers: Mapping[str, Answer], url: str, at: float, recorded: bool, d: Defaults
) -> bytes:
    """The answers folded, as the JSON body of ``GET fleet`` (``url``: the Prometheus shown)."""
    hosts = fold(Decoded(answers), d)
    reply = {"prometheus": url, "t": at, "recorded": recorded, "counts": counts(hosts)}
    reply["fixes"] = FIXES
    reply["hosts"] = hosts
    return dumps(reply).encode()


class Decoded(Mapping[str, Series]):
    """The answers, each decoded when the fold reads it and not kept: the fold reads each
    once, so one answer's objects are alive at a time (at 10,000 hosts all of them at once
    were 170 MB, a filesystem answer alone 40,000 series)."""

    def __init__(self, answers: Mapping[str, Answer]) -> None:
        self._answers = answers

    def __getitem__(self, name: str) -> Series:
        return result(self._answers[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)


def _send(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(FRAME.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        raise EOFError
    size = FRAME.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def serve() -> None:
    """The worker's loop: one ``listing`` per frame on stdin, its reply (or the exception
    it raised) on stdout, until stdin closes (the server closed it, or ended)."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing else may write into the frames
    # the fold on a thread of its own, nicer: where cores are scarce the event loop (and
    # the kernels) before the fold; the HTTP at the server's priority (it mostly waits on
    # Prometheus, and a starved reader would keep Prometheus's answers waiting too)
    lane = ThreadPoolExecutor(1, thread_name_prefix="fold", initializer=_nicer)
    while True:
        try:
            args = _receive(sys.stdin.buffer)
        except EOFError:
            return
        try:
            reply: tuple[bool, Any] = (True, listing(*args, lane=lane))
        except Exception as exc:  # the server raises it, with its one line
            reply = (False, exc)
        _send(out, reply)


def _nicer() -> None:
    """The calling thread only (Linux's nice is a thread's, as ``setpriority`` says) runs
    ``fleet_worker_nice`` nicer."""
    with contextlib.suppress(OSError):
        os.nice(DEFAULTS.fleet_worker_nice)


class ListingProcess:
    """The worker process, started on first use; ``run`` awaits one listing in it (one at
    a time, on one thread: Fleet has one listing in flight)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._io = ThreadPoolExecutor(1, thread_name_prefix="trainwatch-fleet-listing")
        weakref.finalize(self, _stop, self.__dict__)  # a collected Fleet takes its process

    async def run(self, *args: Any, timeout_s: float) -> bytes:
        """``listing(*args)`` in the worker process, awaited from the loop; a worker that
        takes longer than ``timeout_s`` (stopped, swapping), and ``fleet_worker_start_s``
        more when it has to start first, is killed."""
        if self.pid() is None:
            timeout_s += DEFAULTS.fleet_worker_start_s
        call = asyncio.get_running_loop().run_in_executor(self._io, self._call, args)
        try:
            return await asyncio.wait_for(asyncio.shield(call), timeout_s)
        except asyncio.TimeoutError:
            _stop(self.__dict__)  # the call ends at once: its pipe is closed
            call.add_done_callback(lambda f: f.exception())  # WorkerDied: said below
            raise WorkerDied(
                f"the fleet's worker process did not finish the listing within {timeout_s:g} s"
                "; the next listing starts a new one"
            ) from None

    def _call(self, args: tuple[Any, ...]) -> bytes:
        proc = self._started()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _send(proc.stdin, args)
            ok, value = _receive(proc.stdout)
        except (OSError, EOFError):
            try:
                code: int | str = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = "unknown"
            _stop(self.__dict__)
            raise WorkerDied(
                f"the fleet's worker process ended (exit status {code}) during the "
                "listing; the next listing starts a new one"
            ) from None
        if not ok:
            raise value
        return value

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        return self._proc

    def pid(self) -> int | None:
        """The worker process's id while one runs (tests, the benchmark)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self) -> None:
        _stop(self.__dict__)
        self._io.shutdown(wait=False, cancel_futures=True)


def _stop(state: dict[str, Any]) -> None:
    """End the worker: whatever it computes is for a listing no one awaits any more."""
    proc: subprocess.Popen[bytes] | None = state.get("_proc")
    state["_proc"] = None
    if proc is None:
        return
    proc.kill()  # first: a thread blocked on its pipes holds their locks until it is gone
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()
