"""Run mount-touching calls in helper processes that the caller can abandon.

A ``statvfs``/``stat``/write on a network mount whose server stopped answering blocks in
uninterruptible sleep: no timeout, no signal ends it, and the blocked process cannot even
exit until the server answers. So no such call ever runs in our process: each mount gets a
helper process (core.worker.main, started with ``subprocess.Popen`` rather than fork because we
live in Jupyter kernels full of threads). When a call does not answer in time:

- the mount is reported unresponsive (``MountUnresponsive``),
- the helper is killed (it dies whenever the syscall returns) and abandoned, never waited on,
- while it is still alive every new call on that key fails at once: no pile-up of stuck
  processes, one at most per key,
- once it has exited, the next call starts a fresh helper.

A call that reaches only files on mounts that cannot hang (memory filesystems, local disks:
``blockdev.answers_locally``) runs on the caller's own thread instead (core.worker.inline), so
watching a local path costs no process at all.

Calls are keyed by mount point (``mounts.mount_for_path(p).mountpoint``), or by a key of
their own for calls whose timeout must not mark the mount unresponsive (the checkpoint scan),
and run in a lane: the probe runs in its own lane so that a two-second probe never delays
the per-tick statvfs. The lanes are threads of one helper process per mount (``mount``,
the key by default): a watched share costs one process, however many lanes it uses. A call
that does not answer in time stops that process, so the other lanes' calls in flight end
too: as unresponsive where their own key then counts as stuck, otherwise as
WorkerUnavailable (try again: the next call starts a fresh helper).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import signal
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from .. import hostfs
from ..defaults import DEFAULTS
from .helper import HelperDied, HelperProcess, HelperTimeout, Lane

PROBE_LANE = "probe"
INLINE_MODULE = "trainwatch_lab.core.worker.inline"  # see _run_here
TERM_GRACE_S = DEFAULTS.guard_term_grace_s
HOLDER_GRACE_S = DEFAULTS.guard_holder_grace_s


_inline: Any = None  # core.worker.inline, once a call needed it


class MountUnresponsive(Exception):
    """The filesystem did not answer within the timeout (or is still stuck from before)."""

    def __init__(self, key: str, op: str, timeout_s: float, since: float | None = None):
        self.key, self.op, self.timeout_s = key, op, timeout_s
        self.since = since if since is not None else time.monotonic()
        super().__init__(f"no answer within {timeout_s:.1f} s ({op})")


class WorkerUnavailable(RuntimeError):
    """The helper process could not serve the call (still starting, or crashed). Says
    nothing about the mount itself."""


class WorkerFailed(RuntimeError):
    """The operation raised something other than OSError inside the helper."""


@dataclass
class _Stuck:
    worker: HelperProcess
    op: str
    timeout_s: float
    since: float
    signalled: float
    killed: bool


_NOT_HERE = object()


def _run_here(op: str, args: dict[str, Any]) -> Any:
    """``op`` run on this thread when every file it reaches lies on a mount that cannot hang
    (core.worker.inline, loaded by name as the helper is started by name: the guard is the
    one door to a mount, and decides which way each call goes); ``_NOT_HERE`` otherwise.
    Errors are raised as the helper's answer would make ``call`` raise them."""
    global _inline
    if _inline is None:
        _inline = importlib.import_module(INLINE_MODULE)
    try:
        answer = _inline.run_here(op, args)
    except OSError:
        raise
    except Exception as exc:
        raise WorkerFailed(f"{type(exc).__name__}: {exc}") from exc
    return _NOT_HERE if answer is _inline.NOT_HERE else answer


def _raise_remote(msg: dict[str, Any]) -> None:
    err = msg.get("error") or {}
    if err.get("errno") is not None:
        exc = OSError(err["errno"], err.get("strerror") or err.get("message"))
        if err.get("filename") is not None:
            exc.filename = err["filename"]
        raise exc
    raise WorkerFailed(f"{err.get('type', 'Error')}: {err.get('message', '')}")


class MountGuard:
    """Thread-safe gate for every call that can touch a mount. See the module docstring."""

    def __init__(self, timeout_s: float = DEFAULTS.mount_timeout_s, inline: bool = True) -> None:
        """``inline``: run the calls that reach only mounts that cannot hang on the caller's
        thread (``_run_here``); False sends every call to a helper (tests of the helpers)."""
        self.timeout_s = float(timeout_s)
        self.inline = inline
        self._lock = threading.Lock()
        self._workers: dict[str, HelperProcess] = {}  # by mount
        self._stuck: dict[str, list[_Stuck]] = {}
        self._closed = False
        _LIVE_GUARDS.add(self)

    # -- state -------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once close() was called (unload, interpreter exit): every call fails with
        WorkerUnavailable from then on, and threads still running may end quietly."""
        return self._closed

    def _reap(self, key: str) -> _Stuck | None:
        """Forget stuck helpers that have exited; escalate SIGTERM to SIGKILL after the grace
        period. Returns the oldest one still alive. Caller holds ``self._lock``."""
        alive = []
        for s in self._stuck.get(key, []):
            if s.worker.proc.poll() is not None:
                s.worker.close()  # its pipes (the last caller still in flight closes them)
                continue
            if not s.killed and time.monotonic() - s.signalled > TERM_GRACE_S:
                s.worker.signal(signal.SIGKILL)
                s.killed = True
            alive.append(s)
        if alive:
            self._stuck[key] = alive
        else:
            self._stuck.pop(key, None)
        return alive[0] if alive else None

    def is_stuck(self, key: str) -> bool:
        """True while a helper that timed out on this mount is still alive."""
        with self._lock:
            return self._reap(key) is not None

    def stuck_pids(self, key: str | None = None) -> list[int]:
        with self._lock:
            keys = [key] if key is not None else list(self._stuck)
            return [s.worker.pid for k in keys if self._reap(k) for s in self._stuck.get(k, [])]

    def live_pids(self) -> list[int]:
        """Every helper process of this guard still running, stuck ones included."""
        with self._lock:
            pids = [w.pid for w in self._workers.values() if w.proc.poll() is None]
            for key in list(self._stuck):
                if self._reap(key):
                    pids.extend(s.worker.pid for s in self._stuck[key])
            return pids

    def known_pids(self) -> list[int]:
        """Helpers started and not yet forgotten, without asking which are still alive."""
        with self._lock:
            pids = [w.pid for w in self._workers.values()]
            pids.extend(s.worker.pid for stuck in self._stuck.values() for s in stuck)
            return pids

    # -- calls -------------------------------------------------------------------------
    def prestart(self, mount: str) -> None:
        """Start the mount's helper now so that the first real call does not pay for its
        start."""
        with self._lock:
            if not self._closed and self._reap(mount) is None:
                self._worker(mount)

    def _worker(self, mount: str) -> HelperProcess:
        w = self._workers.get(mount)
        if w is None or w.dead or w.proc.poll() is not None:
            if w is not None:
                w.close()
            w = HelperProcess(mount)
            self._workers[mount] = w
        return w

    def call(
        self,
        key: str,
        op: str,
        *,
        timeout: float | None = None,
        lane: str = "main",
        what: str | None = None,
        mount: str | None = None,
        **args: Any,
    ) -> Any:
        """Run ``op`` (see core.worker.main.OPS) for the mount ``key``; the call itself never
        longer than ``timeout``, after waiting for the call before it on that mount and lane
        (at most that call's own time). ``mount``: whose helper process runs it, when the key
        is not the mount point itself (default: ``key``).

        ``what`` names the call in MountUnresponsive's message (default: ``op``). Raises
        MountUnresponsive (now, or still stuck from an earlier call), OSError as raised inside
        the helper, WorkerUnavailable or WorkerFailed. Paths in and out are the host's
        (core.hostfs: under the rootfs prefix for the helper, as the host names them back).
        """
        host = hostfs.current()
        args = host.helper_args(args)
        what = what or op
        timeout = self.timeout_s if timeout is None else float(timeout)
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closed:
                raise WorkerUnavailable("guard is closed")
            # a key of its own (the scan) is not stuck when only the mount is slow; but when
            # the mount itself is stuck its one helper is too, and no second one is started
            stuck = self._reap(key) or (self._reap(mount) if mount else None)
            if stuck is not None:
                raise MountUnresponsive(key, stuck.op, stuck.timeout_s, stuck.since)
        if self.inline and (answer := _run_here(op, args)) is not _NOT_HERE:
            return answer
        with self._lock:
            if self._closed:
                raise WorkerUnavailable("guard is closed")
            w = self._worker(mount or key)
        slot = w.lane(lane)
        if not _take(slot, deadline, timeout):
            if time.monotonic() < slot.until + HOLDER_GRACE_S:  # busy with a longer call
                raise WorkerUnavailable(f"the helper of {mount or key} is busy with a longer call")
            # the call before ours on this mount ran past its own time without an answer
            raise MountUnresponsive(key, what, timeout)
        # our own time starts when the helper takes the call: a wait for the call before
        # it (two paths on one share) says nothing about the share (issue 34)
        deadline = slot.until = time.monotonic() + timeout
        try:
            msg = self._exchange(w, key, lane, op, args, what, timeout, deadline)
        finally:
            slot.lock.release()
        if not msg.get("ok"):
            _raise_remote(msg)
        return host.helper_answer(msg.get("result"))

    def _exchange(
        self,
        w: HelperProcess,
        key: str,
        lane: str,
        op: str,
        args: dict[str, Any],
        what: str,
        timeout: float,
        deadline: float,
    ) -> dict[str, Any]:
        """``call``'s request and answer on ``w`` (the caller holds the lane's lock); a
        timeout or a dead helper raised as ``call`` says."""
        if not w.begin(lane):  # marked stuck, replaced or closed while we waited for it
            self._raise_gone(w, key, "helper process was replaced; try again")
        try:
            return w.request(op, args, deadline, lane)
        except HelperTimeout:
            if not w.ready:
                raise WorkerUnavailable(
                    f"helper process did not start within {timeout:.1f} s"
                ) from None
            since = self._abandon(w, key, what, timeout)
            raise MountUnresponsive(key, what, timeout, since) from None
        except HelperDied:
            if w.verdict is not None:  # stopped for another lane's call that did not answer
                self._raise_gone(w, key, f"helper process was stopped: {w.verdict}")
            with self._lock:
                if self._workers.get(w.key) is w:
                    del self._workers[w.key]
            closed = self._closed  # closed under this call: no crash to explain
            why = "" if closed else w.stderr_tail()
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(0.5)  # it closed its stdout: it is exiting, not stuck
            w.close()
            if closed:
                raise WorkerUnavailable("guard was closed during the call") from None
            status = f"helper process exited (status {w.proc.poll()})"
            raise WorkerUnavailable(f"{status}: {why}" if why else status) from None
        finally:
            w.end(lane)

    def _raise_gone(self, w: HelperProcess, key: str, why: str) -> None:
        """A call that cannot be sent or answered on ``w`` any more: unresponsive while its
        key is stuck or when ``w`` was given up on for a call its mount did not answer (a
        call queued behind that one; it was reported as "replaced; try again", which a path
        source took for an answer), else the guard's closing or ``why``."""
        with self._lock:
            stuck = self._reap(key)
        if stuck is not None:
            raise MountUnresponsive(key, stuck.op, stuck.timeout_s, stuck.since) from None
        if self._closed:
            raise WorkerUnavailable("guard is closed") from None
        if w.gave_up is not None:  # a call before ours on this mount got no answer: the mount
            raise MountUnresponsive(key, *w.gave_up) from None  # would not answer ours either
        raise WorkerUnavailable(why) from None

    def _abandon(self, w: HelperProcess, key: str, op: str, timeout: float) -> float:
        """Kill a helper that timed out and remember it under ``key`` until it has really
        exited; returns when the mount stopped answering. A helper running a probe first
        gets SIGTERM: the probe removes its file (every lane's call in flight cleans up)."""
        now = time.monotonic()
        with self._lock:
            if self._workers.get(w.key) is w:
                del self._workers[w.key]
            if w.verdict is None:  # the first of its calls that ran out of time
                w.verdict = f"{key}: no answer within {timeout:.1f} s ({op})"
                w.gave_up = (op, timeout, now - timeout)
                hard = PROBE_LANE not in w.busy_lanes()
                w.dead = True
                w.signal(signal.SIGKILL if hard else signal.SIGTERM)
                w.stop()  # its other lanes' calls in flight end now
            else:
                hard = False  # signalled already; _reap escalates as for the first key
            stuck = self._stuck.setdefault(key, [])
            if not any(s.worker is w for s in stuck):
                stuck.append(
                    _Stuck(w, op, timeout, since=now - timeout, signalled=now, killed=hard)
                )
        return now - timeout

    def close(self) -> None:
        """Stop every helper without waiting for any of them."""
        with self._lock:
            self._closed = True
            workers, self._workers = list(self._workers.values()), {}
            for stuck in self._stuck.values():
                for s in stuck:
                    s.worker.signal(signal.SIGKILL)
        for w in workers:
            w.close()

    def __enter__(self) -> MountGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _take(w: Lane, wait_until: float, own_s: float) -> bool:
    """``w.lock`` (a lane of a helper): waited for until ``wait_until``, and longer while the
    call holding it is still within its own time (it will answer, or time out and mark the
    mount stuck), but never more than ``own_s`` (the caller's own timeout) longer: a short
    call behind a long one is not held for the long one's time. False when not taken."""
    cap = wait_until + own_s
    while not w.lock.acquire(timeout=max(0.0, wait_until - time.monotonic())):
        holder_until = min(w.until + HOLDER_GRACE_S, cap)
        if holder_until <= wait_until:
            return False
        wait_until = holder_until
    return True


_LIVE_GUARDS: weakref.WeakSet[MountGuard] = weakref.WeakSet()
_default: MountGuard | None = None
_default_lock = threading.Lock()


def default_guard() -> MountGuard:
    """The process-wide guard (one set of helpers shared by every surface)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = MountGuard()
        return _default


def helper_pids() -> set[int]:
    """Every helper process of every guard in this process: the process-I/O source leaves
    them out, since their statvfs and probe writes are ours, not the training job's.
    Asked every tick, so nothing is polled: a helper that just exited may still be listed,
    which is harmless (it is in nobody's process tree any more)."""
    return {pid for guard in list(_LIVE_GUARDS) for pid in guard.known_pids()}


@atexit.register
def _close_all() -> None:
    """At exit: signal helpers, wait for none (a stuck one may never exit)."""
    for guard in list(_LIVE_GUARDS):
        guard.close()
