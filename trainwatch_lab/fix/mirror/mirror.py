"""``local_mirror``: log to local disk, and a background copy keeps the share up to date.

Training that logs step by step to a share waits on the share at every flush; when the
server stalls, the step stalls. Here the training writes to a local directory only, and a
daemon thread copies what changed (mirror.plan: new or rewritten files whole under a
temporary name then renamed, grown files by their new bytes once the bytes before them are
proven unchanged) every ``every`` seconds. One mirror per share directory: a lock file there
refuses a second (mirror.lock). Every touch of the share is a call through the mount guard
(its own key and lane, so the mirror's big copies never make the sampler's statvfs look
stuck): a dead share costs the mirror thread a timeout and nothing else; the local copy
keeps growing, the status says so, and the next round after the share answers catches up.
At exit a bounded final sync runs (atexit, after flushing the files the script left open;
SIGTERM too: mirror.at_exit); the thread is a daemon and never holds exit up.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.atomic_write import write_atomically
from ...core.defaults import DEFAULTS
from ...core.guard.guard import MountGuard, MountUnresponsive, default_guard
from ...core.paths.names import normalise, printable
from ...core.private import PRIVATE_MODE, untrusted
from ...core.storage.mounts import mount_for_path, read_mounts
from .. import scratch
from . import plan as mp
from .at_exit import register as _register
from .at_exit import registered as _registered
from .at_exit import unregister as _unregister
from .lock import ShareInUse, ShareLock
from .released import ReleasedLog
from .room import RoomKeeper, pad
from .seed import seed
from .status import MirrorStatus

log = logging.getLogger(__name__)

EVERY_S = 30.0  # a TensorBoard reader refreshes about as often
RETRY_S = 5.0  # while the share does not answer, try again this often (or every ``every``)
EXIT_SYNC_S = 10.0  # the final sync at interpreter exit never takes longer

MIN_RATE = 1024 * 1024  # a call through the guard may take the mount timeout plus 1 s per MiB
LANE = "mirror"
KEY = "{} (mirror)"
STATUS_FILE = f"{mp.LOCK_PREFIX}.json"  # the status for other processes, beside the logs


def check_share(share: str, guard: MountGuard) -> None:
    """Refuse a share path that can never be a directory (a file is there or in the way).
    A share that does not answer is no error: the mirror keeps the local copy until it does."""
    mountpoint = mount_for_path(share, read_mounts()).mountpoint
    try:
        raw = guard.call(KEY.format(mountpoint), "inspect", lane=LANE, what="stat", path=share)
    except MountUnresponsive as exc:
        log.warning("trainwatch: the share %s does not answer (%s); logging locally", share, exc)
        return
    if not raw["is_dir"]:
        where = "is" if raw["exists"] else f"cannot be created: {printable(raw['target'])} is"
        raise ValueError(f"share {printable(share)} {where} a {raw['file_type']}, not a directory")


class Mirror(os.PathLike):  # type: ignore[type-arg]
    """A local directory (use it where the share would go) copied to ``share``."""

    def __init__(
        self,
        local: str | os.PathLike[str],
        share: str | os.PathLike[str],
        *,
        every: float = EVERY_S,
        exit_timeout: float = EXIT_SYNC_S,
        guard: MountGuard | None = None,
        lock_fd: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        reserve: int | None = None,
    ) -> None:
        if not isinstance(every, (int, float)) or not math.isfinite(every) or every <= 0:
            raise ValueError(f"every must be a positive number of seconds, not {every!r}")
        _check_reserve(reserve)
        self._reserve = reserve  # bytes kept free on the local disk (None: core.defaults)
        self.local, self.share = normalise(os.fspath(local)), normalise(os.fspath(share))
        why = scratch.local_refusal(self.local)
        if why is not None:
            raise ValueError(f"local: {why}")
        for a, b in ((self.local, self.share), (self.share, self.local)):
            if a == b or a.startswith(b.rstrip(os.sep) + os.sep):
                raise ValueError(f"the local directory and the share overlap: {a} is in {b}")
        self.every, self.exit_timeout = float(every), float(exit_timeout)
        self._guard = guard if guard is not None else default_guard()
        self._key = KEY.format(mount_for_path(self.share, read_mounts()).mountpoint)
        self._lock_fd = lock_fd
        self._share_lock = ShareLock(self.share, self.local)
        self._held_at: float | None = None  # when the share's lock was last claimed
        self._clock = clock  # what _held_at is read on (tests: a clock that jumps)
        self._lock = threading.RLock()  # the fields below (reentrant: SIGTERM's final sync)
        self._copied: dict[str, mp.Copied] = {}
        self._seeded = False
        self._unfinished: set[str] = set()  # share temporaries of copies not finished
        self._state, self._error = "starting", None
        self._last_sync: float | None = None
        self._as_of = time.time()  # the share holds what was written before this
        self._bytes_copied = 0
        self._cv = threading.Condition()  # the fields below
        self._requested = self._served = 0
        self._stop, self._deadline = False, None
        os.makedirs(self.local, mode=PRIVATE_MODE, exist_ok=True)
        why = untrusted(self.local)  # another user could read the logs, or add files
        if why is not None:
            raise ValueError(f"local: {why}")
        self._local_id = mp.identity(self.local)  # a rename or a re-creation changes it
        owned = self._lock_fd is None  # one mirror per local directory (the keeper pads it)
        if owned:
            self._lock_fd = scratch.lock(self.local)
            if self._lock_fd is None:
                raise ValueError(f"local: another mirror copies from {printable(self.local)}")
        try:
            self._start()
        except BaseException:
            if owned and self._lock_fd is not None:
                scratch.release(self._lock_fd)
            raise

    def _start(self) -> None:
        """The rest of ``__init__``, once the local directory is this mirror's alone."""
        # what an earlier mirror released here (padding, the records only on the share);
        # a pad it was killed in the middle of is completed now (local disk only)
        self._released = ReleasedLog(self.local)
        self._released.recover(pad)
        self._lost: dict[str, tuple[int, str]] = {}  # rel -> (ino, why it is not copied)
        # the files the share may hold copies of: none is dropped before the seed proves
        # what it holds (files made since may be: the share holds nothing of them)
        files, _ = mp.scan(self.local, mp.SCAN_LIMIT)
        self._at_start = {(rel, f.ino) for rel, f in files.items()}
        self._claim_at_start()
        # keeps room on the local disk (mirror.room): releases, then drops, event records
        self._room = RoomKeeper(
            self.local,
            self._copied_now,
            self._set_released,
            released=self._released,
            ready=lambda rel, ino: self._seeded or (rel, ino) not in self._at_start,
            reserve=self._reserve,
        )
        self._thread = threading.Thread(target=self._run, name="trainwatch-mirror", daemon=True)
        _register(self)
        self._room.start()
        self._thread.start()

    def _claim_at_start(self) -> None:
        """Refuse at once (ShareInUse) when another mirror holds the share; a share that does
        not answer now is claimed by the first round that reaches it."""
        try:
            answer = self._guard.call(
                self._key,
                "claim_share",
                lane=LANE,
                timeout=DEFAULTS.mount_timeout_s,
                what="mirror claim_share",
                **self._share_lock.claim_args(_live_tokens()),
            )
        except MountUnresponsive:
            return
        except OSError as exc:  # the share refuses writes: the rounds say so
            log.debug("trainwatch: could not claim %s: %s", self.share, exc)
            return
        if not answer["ok"]:
            raise ShareInUse(self._share_lock.refusal(answer))
        self._held_at = self._clock()

    # -- the path users write to --------------------------------------------------------
    def __fspath__(self) -> str:
        return self.local

    def __str__(self) -> str:
        return self.local

    def __repr__(self) -> str:
        return f"Mirror({self.local!r} -> {self.share!r}, every={self.every:g})"

    def __truediv__(self, other: str | os.PathLike[str]) -> Path:
        return Path(self.local) / other

    @property
    def path(self) -> Path:
        return Path(self.local)

    # -- control ------------------------------------------------------------------------
    def sync(self, timeout: float | None = None) -> bool:
        """Copy now and wait up to ``timeout`` seconds (None: as long as it takes) for the
        round to end; True when the share then holds everything written before the call."""
        with self._cv:
            if self._stop:
                return self.status().bytes_pending == 0
            self._requested += 1
            wanted = self._requested
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._served >= wanted, timeout)
        st = self.status()
        return st.state == "in-sync" and st.bytes_pending == 0

    def close(self, timeout: float | None = None) -> bool:
        """Final sync (at most ``timeout`` seconds, default ``exit_timeout``), then stop.
        The local directory stays. True when the share holds everything."""
        timeout = self.exit_timeout if timeout is None else float(timeout)
        with self._cv:
            if not self._stop:
                self._stop = True
                self._deadline = time.monotonic() + timeout
                self._requested += 1
                self._cv.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(max(0.0, timeout) + 0.5)
        self._room.close()
        if self._held_at is not None and not self._thread.is_alive():
            self._held_at = None
            self._call("release_share", 0, **self._share_lock.release_args())
        _unregister(self)
        if self._lock_fd is not None:
            scratch.release(self._lock_fd)
            self._lock_fd = None
        st = self.status()
        done = st.bytes_pending == 0 and st.state != "error"
        with self._lock:
            self._state = "closed" if done else self._state
        return done

    def __enter__(self) -> Mirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def status(self) -> MirrorStatus:
        """As of now: the local directory is scanned again (local disk, no share touched)."""
        gone = None
        try:
            files, truncated = mp.scan(self.local, mp.SCAN_LIMIT, self._local_id)
        except mp.LocalGone as exc:  # never "in sync": what is written now is not copied
            files, truncated, gone = {}, False, self._gone(exc)
        with self._lock:
            pending = mp.pending_bytes(files, self._copied)
            state, error = self._state, self._error
            if state == "in-sync" and pending:
                state = "copying"
            if truncated:  # never "in sync" while files past the limit are not copied
                state, error = "error", self._too_many()
            if gone is not None:
                state, error = "error", gone
            if self._room.error is not None and error is None:
                error = self._room.error
            return MirrorStatus(
                local=self.local,
                share=self.share,
                state=state,
                last_sync=self._last_sync,
                lag_s=max(0.0, time.time() - self._as_of) if pending else 0.0,
                bytes_pending=pending,
                bytes_copied=self._bytes_copied,
                files=len(files),
                error=error,
                **self._room.state(),
            )

    def _copied_now(self) -> dict[str, mp.Copied]:
        """What the share holds (for the room keeper)."""
        with self._lock:
            return dict(self._copied)

    def _set_released(self, rel: str, ino: int, pad_from: int, released: int) -> None:
        """The room keeper padded ``rel`` up to ``released`` (the padding record from
        ``pad_from``): those bytes are not proven, never copied again."""
        with self._lock:
            c = self._copied.get(rel)
            if c is not None and c.ino == ino and released > c.released:
                self._copied[rel] = replace(c, released=released, pad_from=pad_from)

    def _gone(self, exc: OSError) -> str:
        return f"the local directory is gone: {exc.strerror}; nothing written there now is copied"

    def _too_many(self) -> str:
        return (
            f"more than {mp.SCAN_LIMIT} files in {printable(self.local)}: those past the "
            "limit are not copied"
        )

    # -- the thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cv:
                if not self._stop and self._requested <= self._served:
                    down = self._state in ("share-unresponsive", "error")
                    self._cv.wait(min(self.every, RETRY_S) if down else self.every)
                stop, wanted = self._stop, self._requested
            try:
                self._round()
            except Exception as exc:  # a bug must not end the mirror silently
                log.exception("trainwatch: mirror round failed")
                self._set_state("error", f"{type(exc).__name__}: {exc}")
            self._publish()
            with self._cv:
                self._served = max(self._served, wanted)
                self._cv.notify_all()
            if stop:
                return

    def _publish(self) -> None:
        """The status as JSON beside the logs (``.trainwatch-mirror.json``, never copied), for
        readers in other processes (the Jupyter server's panel); replaced atomically. The
        last round of ``close`` publishes "closed" when it left nothing behind, so readers
        stop listing the mirror (fix.mirror.files)."""
        path = os.path.join(self.local, STATUS_FILE)
        status = self.status()
        with self._cv:
            closing = self._stop
        if closing and status.bytes_pending == 0 and status.state != "error":
            status = replace(status, state="closed")
        data = {**status.to_json(), "pid": os.getpid(), "every": self.every}
        try:
            write_atomically(path, json.dumps(data).encode(), mode=0o600, durable=False)
        except OSError:  # the status file is a convenience: never a reason to stop copying
            log.debug("trainwatch: could not write %s", path, exc_info=True)

    def _timeout(self, nbytes: int) -> float | None:
        """A call's timeout; None once a closing deadline has passed."""
        timeout = DEFAULTS.mount_timeout_s + nbytes / MIN_RATE
        with self._cv:
            deadline = self._deadline
        if deadline is None:
            return timeout
        left = deadline - time.monotonic()
        return min(timeout, left) if left > 0.05 else None

    def _call(self, op: str, nbytes: int, **args: Any) -> Any:
        """One call through the guard; None when it failed (the state says why)."""
        timeout = self._timeout(nbytes)
        if timeout is None:
            return None
        try:
            return self._guard.call(
                self._key, op, lane=LANE, timeout=timeout, what=f"mirror {op}", **args
            )
        except MountUnresponsive as exc:
            self._set_state("share-unresponsive", str(exc))
        except Exception as exc:  # OSError from the share, a helper that would not start
            self._set_state("error", f"{type(exc).__name__}: {exc}")
        return None

    def _round(self) -> None:
        try:
            self._copy_round()
        except mp.LocalGone as exc:
            self._set_state("error", self._gone(exc), kept=False)

    def _copy_round(self) -> None:
        try:
            self._copy_files()
        finally:
            with self._room.lock:
                self._room.floors.clear()

    def _copy_files(self) -> None:
        started = time.time()
        if not self._hold_share() or (not self._seeded and not self._seed()):
            return
        if self._unfinished and not self._drop_unfinished():
            return
        files, truncated = mp.scan(self.local, mp.SCAN_LIMIT, self._local_id)
        with self._lock:  # never copied again (_released_gone), said at the round's end
            lost = {r for r, (ino, _) in self._lost.items() if r in files and files[r].ino == ino}
            files = {r: f for r, f in files.items() if self._lost.get(r, (-1,))[0] != f.ino}
        with self._room.lock:  # the proofs read bytes the room keeper may pad
            with self._lock:
                copied = dict(self._copied)
            queue = [
                (job, item)
                for job in mp.plan(self.local, files, copied)
                for item in mp.items(job, self.local, self.share)
            ]
        errors: list[str] = []
        progress: dict[int, list[mp.Range]] = {}  # id(job) -> the ranges it wrote so far
        redone: set[str] = set()
        whole_lost: set[str] = set()  # met this round (_released_gone)
        while queue:
            if not self._hold_share():  # a long round renews (and re-checks) the lock too
                return
            batch, size = mp.take_batch(queue, lambda q: q[1]["length"])
            budget = (self._timeout(size) or 0.0) / 2
            self._unfinished |= {i["dst"] for j, i in batch if not j.append}
            with self._room.lock:  # the keeper pads nothing the helper is about to read
                floors = self._room.floors
                for job, item in batch:
                    end = item["offset"] + item["length"]
                    floors[job.file.rel] = max(floors.get(job.file.rel, 0), end)
            results = self._call("copy_ranges", size, items=[i for _, i in batch], budget_s=budget)
            if results is None:  # a helper killed mid-copy leaves its temporary: next round
                return
            failed, whole = self._apply(batch, results, errors, progress)
            self._unfinished -= {
                i["dst"] for (_, i), r in zip(batch, results, strict=False) if _renamed(i, r)
            }
            rest = batch[len(results) :] + queue
            queue = [q for q in rest if q[0].file.rel not in failed | whole]
            whole_lost |= self._released_gone(whole)
            whole -= whole_lost
            for job in {j.file.rel: j for j, _ in batch if j.file.rel in whole - redone}.values():
                redone.add(job.file.rel)  # the share's copy cannot take an append: copy whole
                again = mp.Job(job.file, 0, append=False)
                queue += [(again, item) for item in mp.items(again, self.local, self.share)]
        if truncated:
            errors.insert(0, self._too_many())
        with self._lock:
            errors += [why for r, (_, why) in self._lost.items() if r in lost or r in whole_lost]
        self._ended(started, errors)

    def _hold_share(self) -> bool:
        """Claim the share's lock (mirror.lock), or refresh it now and then; False while
        another mirror holds it or the share does not answer (the state says which)."""
        now = self._clock()
        if self._held_at is not None and now - self._held_at < DEFAULTS.mirror_lock_stale_s / 3:
            return True
        answer = self._call("claim_share", 0, **self._share_lock.claim_args(_live_tokens()))
        if answer is None:
            return False
        if not answer["ok"]:
            self._held_at = None
            self._set_state("error", self._share_lock.refusal(answer))
            return False
        self._held_at = now
        return True

    def _drop_unfinished(self) -> bool:
        """Remove the temporaries of copies an earlier round left unfinished (a helper
        killed on timeout, a share that stopped answering), before any new one takes room
        on the share; False when the share did not answer."""
        if self._call("remove", 0, paths=sorted(self._unfinished)) is None:
            return False
        self._unfinished.clear()
        return True

    def _seed(self) -> bool:
        """First round: what the share already holds, proven (mirror.seed)."""
        found = seed(self._call, self._timeout, self.local, self.share, self._released.entries)
        if found is None:
            return False
        copied, lost = found
        with self._lock:
            self._copied, self._seeded = copied, True
            self._lost.update(
                (rel, (e.ino, _lost_text(rel, e.head_end, e.released))) for rel, e in lost.items()
            )
        return True

    def _apply(
        self,
        batch: list[tuple[mp.Job, dict[str, Any]]],
        results: list[Any],
        errors: list[str],
        progress: dict[int, list[mp.Range]],
    ) -> tuple[set[str], set[str]]:
        """Record what the share now holds (the digests of the bytes the helper wrote);
        returns the files whose copy failed, and those whose share copy cannot take an
        append (gone, shorter: copied whole next). A file that changed while it was copied
        is no error: its times are not recorded, so the next round proves it again."""
        failed: set[str] = set()
        whole: set[str] = set()
        for (job, item), result in zip(batch, results, strict=False):
            f = job.file
            if result.get("whole"):
                whole.add(f.rel)
                with self._lock:
                    self._copied.pop(f.rel, None)
                continue
            if "error" in result or result.get("gone") or result["copied"] != item["length"]:
                failed.add(f.rel)
                if "error" in result:
                    why = result["error"].get("strerror") or result["error"].get("message")
                    errors.append(f"the share refused {printable(f.rel)}: {why}")
                continue
            done = progress.setdefault(id(job), list(job.kept))
            done.append((item["offset"], result["end"], result["digest"]))
            last = "mtime_ns" in item
            unmoved = last and result["src"] == [f.size, f.mtime_ns, f.ctime_ns, f.ino]
            times = (f.mtime_ns, f.ctime_ns) if unmoved else (mp.MOVED if last else -1,) * 2
            with self._lock:
                self._bytes_copied += result["copied"]
                if job.append or "rename_to" in item:
                    ranges = tuple(done)
                    old = self._copied.get(f.rel)
                    keep = job.append and old is not None and old.ino == f.ino
                    self._copied[f.rel] = mp.Copied(
                        result["end"],
                        f.ino,
                        times[0],
                        ranges,
                        times[1],
                        old.released if keep and old else 0,
                        old.pad_from if keep and old else 0,
                    )
            if "rename_to" in item:  # copied whole: nothing of it is released any more
                self._released.forget(f.rel)
        return failed, whole

    def _released_gone(self, whole: set[str]) -> set[str]:
        """Of the files whose share copy can no longer be appended to (gone, shorter),
        those whose copied records were released here: copying them whole would put
        padding where the records were. Never copied again; the status says so."""
        gone = set()
        for rel in whole:
            e = self._released.entries.get(rel)
            if e is None or not e.released:
                continue
            gone.add(rel)
            with self._lock:
                self._lost[rel] = (e.ino, _lost_text(rel, e.head_end, e.released))
        return gone

    def _ended(self, started: float, errors: list[str]) -> None:
        """A round that reached the share to its end: in sync, or the files it refused."""
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            self._set_state("error", f"{errors[0]}{more}")
            return
        with self._lock:
            back = self._state in ("share-unresponsive", "error")
            self._state, self._error = "in-sync", None
            self._last_sync, self._as_of = time.time(), started
        if back:
            log.warning("trainwatch: mirror of %s: the share answers again, caught up", self.share)

    def _set_state(self, state: str, error: str, kept: bool = True) -> None:
        """``kept``: the logs wait in the local directory (not so when it is gone)."""
        with self._lock:
            changed = self._state != state
            self._state, self._error = state, error
        if changed:
            tail = f"; the logs stay in {self.local} and are copied later" if kept else ""
            log.warning("trainwatch: mirror of %s: %s%s", self.share, error, tail)


def _lost_text(rel: str, start: int, end: int) -> str:
    return (
        f"{printable(rel)}: bytes {start}-{end} were released here once copied (the local "
        "disk filled), and the share's copy no longer holds them: the file is not copied "
        "again (that would write padding over the share's copy)"
    )


def _check_reserve(reserve: object) -> None:
    if reserve is not None and (
        not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 0
    ):
        raise ValueError(f"reserve must be a number of bytes (0 or more), not {reserve!r}")


def _renamed(item: dict[str, Any], result: Any) -> bool:
    """A copy item whose temporary is gone: renamed over the real name, or removed by the
    helper after it failed."""
    if "error" in result or result.get("gone") or result["copied"] != item["length"]:
        return True
    return "rename_to" in item


def local_mirror(
    share_dir: str | os.PathLike[str],
    *,
    every: float = EVERY_S,
    local_root: str | os.PathLike[str] | None = None,
    reserve: int | None = None,
) -> Mirror:
    """A local directory, on a local disk with room, that is copied to ``share_dir`` every
    ``every`` seconds: ``SummaryWriter(local_mirror("/mnt/share/runs/exp1"))``.

    Raises ValueError for a share path that is a file (or cannot be created), ``every`` that
    is not a positive number, or ``local_root`` on a network mount. ``reserve``: the bytes
    kept free on the local disk (fix.mirror.room; default: ``mirror_reserve_fraction`` of
    it, at most ``mirror_reserve_bytes``).
    """
    if not isinstance(share_dir, (str, os.PathLike)):
        raise TypeError(f"share_dir must be a path, not {type(share_dir).__name__}")
    if not isinstance(every, (int, float)) or not math.isfinite(every) or every <= 0:
        raise ValueError(f"every must be a positive number of seconds, not {every!r}")
    _check_reserve(reserve)
    share = normalise(os.fspath(share_dir))
    guard = default_guard()
    check_share(share, guard)
    root = scratch.pick_root(local_root, guard)
    local, fd = scratch.claim(share, root)
    try:
        return Mirror(local, share, every=every, guard=guard, lock_fd=fd, reserve=reserve)
    except BaseException:
        scratch.release(fd)
        raise


def active_mirrors() -> list[Mirror]:
    """The mirrors of this process that are not closed."""
    return _registered()


def _live_tokens() -> list[str]:
    return [m._share_lock.holder["token"] for m in active_mirrors()]
