"""The sampler's source for the watched paths: one look per path per tick, never blocked
by a dead mount; probes and checkpoint scans on threads of their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import replace
from typing import Any

from .. import hostfs
from ..defaults import DEFAULTS, Defaults
from ..guard.guard import MountGuard, MountUnresponsive, WorkerFailed, WorkerUnavailable
from ..model import PathState, ProbeResult, Sample
from ..storage.mount_facts import MountFacts
from ..storage.mounts import MountEntry, classify, mount_for_path, read_mounts
from ..storage.probe import READ_ONLY, probe_with_evidence
from ..storage.quota import apply_quota
from ..storage.space import scan_checkpoints
from .look import (
    INSPECT_WHAT,
    apply_inspect,
    describe,
    look_without_following,
    mounts_below,
    probes_allowed,
    quota_device,
    read_quota,
    scan_checkpoints_guarded,
)
from .names import correct_mount, normalise, resolved_path
from .watch import MountKey, Watch


def mount_key(entry: MountEntry) -> MountKey:
    return (entry.mount_id, entry.dev, entry.mountpoint)


class PathsSource:
    """Sampler source for the watched paths (``sample.paths``).

    Per tick, one look per path (exists, st_dev, statvfs). Paths on mounts that cannot hang
    (memory filesystems, kernel filesystems on a local disk: ``blockdev.answers_locally``) are
    looked at on the sampler thread, which costs a few syscalls; every other path is asked
    through its mount's guard helper, all of them in parallel on a small pool of threads, so
    ``collect`` returns within the timeout even when several mounts are dead, and at once
    for a mount that is still stuck. The first look at a path always goes through the
    guard: it tells where the path really lives (symlinks followed). Only a path that is
    not a symlink away from somewhere else is then looked at directly, by
    ``look_without_following``, which hands back to the guard as soon as a symlink or
    another mount is on the way. Probes (at ``add``, then every ``defaults.probe_every_s``,
    or ``local_probe_every_s`` for a path looked at locally) and checkpoint scans (at most
    every ``CHECKPOINT_RESCAN_S``, with their own budget; in the scan helper unless looked
    at locally) run on their own threads; each tick reports the latest result.
    """

    name = "paths"

    def __init__(
        self,
        paths: Iterable[str] = (),
        defaults: Defaults = DEFAULTS,
        probe: bool = True,
        guard: MountGuard | None = None,
        *,
        sys_root: str | None = None,
        owner: int | None = None,
    ) -> None:
        self.defaults = defaults
        self.owner = owner  # whose quota applies to a path added without an owner
        # write probes into other users' directories found on the machine (an admin's choice:
        # c.TrainWatch.probe_other_users); off, they get read-only facts only
        self.probe_others = False
        self.probe_enabled = probe
        host = hostfs.current()
        self.sys_root = sys_root or host.sysfs
        self._host_local = host.local
        self._own_guard = guard is None
        self.guard = guard if guard is not None else MountGuard(defaults.mount_timeout_s)
        self._lock = threading.Lock()
        self._watches: dict[str, Watch] = {}
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None  # for guarded looks; made when needed
        self._facts: dict[int, MountFacts] = {}  # by mount id, for one mount table
        self._facts_of_table: list[MountEntry] | None = None  # the mount table _facts is for
        for p in paths:
            self.add(p)

    # -- watched paths -----------------------------------------------------------------
    @property
    def paths(self) -> list[str]:
        with self._lock:
            return list(self._watches)

    def add(self, path: str, owner: int | None = None, requested: bool | None = None) -> str:
        """Watch ``path`` (idempotent); returns its normalised key. ``owner``: the process
        that writes there, whose quota applies (default: the source's); given for a path
        already watched, it becomes its owner (a training process found writing where the
        user or a kernel already watches). Starts its helper and its first probe in the
        background (no helper for a mount that answers locally: core.worker.inline); never
        touches the path on this thread. ``requested``: asked for (a user,
        a kernel), not found on the machine; by default, when no ``owner`` is given."""
        key = normalise(path)
        requested = owner is None if requested is None else requested
        with self._lock:
            if self._closed:
                return key
            if (known := self._watches.get(key)) is not None:
                if owner is not None:
                    known.own(owner)
                known.requested = requested
                return key
            watch = self._watches[key] = Watch(
                key, owner=self.owner if owner is None else owner, requested=requested
            )
        try:
            mounts = read_mounts()
        except OSError:
            return key
        entry = self._entry(watch, mounts)
        if entry is not None:
            watch.moved_to(mount_key(entry))
            if not (self.guard.inline and self._facts_of(entry, mounts).answers_locally):
                self.guard.prestart(entry.mountpoint)
            if self.probe_enabled and not entry.read_only and classify(entry) != "pseudo":
                self._submit_probe(watch, entry)  # (the helper refuses a FIFO, a device)
        return key

    def remove(self, path: str) -> None:
        with self._lock:
            self._watches.pop(normalise(path), None)

    def owner_of(self, path: str) -> int | None:
        """The process whose quota is read for ``path`` (None: ours, or not watched)."""
        return getattr(self._watches.get(normalise(path)), "owner", None)

    def set_owner(self, path: str, owner: int | None) -> None:
        """``path``'s writer is now ``owner`` (None: the source's, as when its writer left
        and the path stays watched for another reason)."""
        with self._lock:
            if (watch := self._watches.get(normalise(path))) is not None:
                watch.own(self.owner if owner is None else owner)

    def _entry(self, watch: Watch, mounts: list[MountEntry] | None = None) -> MountEntry | None:
        try:
            mounts = mounts if mounts is not None else read_mounts()
            return mount_for_path(watch.real or watch.key, mounts)
        except (OSError, LookupError):
            return None

    # -- probes ------------------------------------------------------------------------
    def _submit_probe(self, watch: Watch, entry: MountEntry) -> None:
        with watch.lock:
            if watch.probe_thread is not None and watch.probe_thread.is_alive():
                return
            watch.probe_at = time.monotonic()
            thread = threading.Thread(
                target=self._run_probe,
                args=(watch, entry.mountpoint, mount_key(entry)),
                name=f"trainwatch-probe {watch.key}",
                daemon=True,
            )
            watch.probe_thread = thread
        thread.start()

    def _run_probe(self, watch: Watch, mountpoint: str, mount: MountKey) -> None:
        d = self.defaults
        try:
            owned_only = not (watch.requested or self.probe_others)
            result = probe_with_evidence(
                self.guard, mountpoint, watch.key, d, owned_only=owned_only
            )
        except MountUnresponsive as exc:
            result = ProbeResult(None, None, 0, error=str(exc))
        except (OSError, WorkerUnavailable, WorkerFailed) as exc:
            result = ProbeResult(None, None, 0, error=describe(exc))
        except Exception:
            if not (self._closed or self.guard.closed):
                raise  # a bug while running: let it show
            return  # closed under the probe (unload, exit): nobody is left to tell
        with watch.lock:
            if watch.mount == mount:  # (else the path moved meanwhile: a figure of elsewhere)
                watch.probe = result

    # -- checkpoint scans --------------------------------------------------------------

    def _run_scan(
        self,
        watch: Watch,
        mountpoint: str,
        skip: frozenset[str],
        here: bool,
        mount: MountKey | None,
    ) -> None:
        """On its own daemon thread. A directory looked at locally is listed from here (the
        scan follows no symlink and does not enter the mount points in ``skip``); any other
        in the mount's scan helper. The scan stops after its budget either way."""
        d = self.defaults
        try:
            if here:
                info = scan_checkpoints(
                    watch.key, budget_s=d.checkpoint_scan_budget_s, skip_dirs=skip
                )
            else:
                info = scan_checkpoints_guarded(self.guard, mountpoint, watch.key, d, skip)
        except (MountUnresponsive, OSError, WorkerUnavailable, WorkerFailed):
            return  # keep what the last scan saw; the statvfs of each tick says if it is dead
        except Exception:
            if not (self._closed or self.guard.closed):
                raise  # a bug while running: let it show
            return  # closed under the scan (unload, exit): nobody is left to tell
        with watch.lock:
            if watch.mount == mount:  # (else the path moved meanwhile)
                watch.checkpoints = info

    # -- ticks -------------------------------------------------------------------------
    def _facts_of(self, entry: MountEntry, mounts: list[MountEntry]) -> MountFacts:
        """Remembered by mount id for the current table only: ids are reused once a mount
        is gone, and a late look from an older table must not leave its facts behind."""
        if mounts is not self._facts_of_table:
            return MountFacts.of(entry, mounts, self.sys_root)
        facts = self._facts.get(entry.mount_id)
        if facts is None:
            facts = self._facts[entry.mount_id] = MountFacts.of(entry, mounts, self.sys_root)
        return facts

    def _submit(self, fn: Any, *args: Any) -> Future[None] | None:
        """Run ``fn`` on the pool (made on first use); None once the source is closed. Only
        guarded looks go there: the guard bounds each by the mount timeout, so no pool thread
        can keep the interpreter from exiting for longer than that."""
        with self._lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.defaults.max_watched_paths,
                    thread_name_prefix="trainwatch-path",
                )
            try:
                return self._pool.submit(fn, *args)
            except RuntimeError:  # the interpreter is shutting down
                return None

    def _tick_one(
        self,
        watch: Watch,
        state: PathState,
        entry: MountEntry,
        mounts: list[MountEntry],
        raw: dict[str, Any] | None = None,
    ) -> None:
        """One look at a path: ``raw`` when it was already looked at locally, else through
        the guard (on a pool thread)."""
        if raw is None:
            try:
                raw = self.guard.call(
                    entry.mountpoint,
                    "inspect",
                    timeout=self.defaults.mount_timeout_s,
                    what=INSPECT_WHAT,
                    path=watch.key,
                    quota=time.monotonic() >= watch.quota_none_until,
                    device=quota_device(entry),
                    pid=watch.owner,
                )
            except MountUnresponsive as exc:
                state.responsive, state.error = False, str(exc)
                return
            except (OSError, WorkerUnavailable, WorkerFailed) as exc:
                state.error = describe(exc)
                return
        mtime = raw.get("mtime_ns")  # only local looks know it
        if mtime is not None:  # no symlink, every component on this mount: nothing to correct
            actual, watch.real = entry, watch.key
        else:
            actual = correct_mount(entry, raw, watch.key, mounts)
            if actual is not entry:
                self._facts_of(actual, mounts).apply(state)
            watch.real = resolved_path(raw, watch.key)
        apply_inspect(state, raw)
        self._quota(watch, state, actual, raw, here=mtime is not None)
        with watch.lock:
            if mtime is None or mtime != watch.dir_mtime:
                watch.dir_changed_at = time.monotonic()
            watch.dir_mtime = mtime
        # looked at locally (the mtime tells): the checkpoint scan can be done here too
        self._after_look(
            watch, state, actual, raw["exists"] and raw["is_dir"], mounts, here=mtime is not None
        )

    def _quota(
        self, watch: Watch, state: PathState, entry: MountEntry, raw: dict[str, Any], here: bool
    ) -> None:
        """Space left under the binding quota (core.storage.quota), read each tick: from here when
        looked at locally, else by the mount's helper in the look's round trip. No quota
        changes nothing (Watch.quota_from says so once)."""
        if state.read_only or state.kind == "pseudo" or time.monotonic() < watch.quota_none_until:
            return
        if not (raw["is_dir"] or raw.get("file_type") == "file"):
            return  # never open a FIFO or a device
        answer = raw.get("quota") if not here else read_quota(entry, raw, watch.owner)
        quota = watch.quota_from(answer, entry.mountpoint)
        if quota is not None:
            apply_quota(state, quota)

    def _after_look(
        self,
        watch: Watch,
        state: PathState,
        actual: MountEntry,
        is_dir: bool,
        mounts: list[MountEntry],
        here: bool,
    ) -> None:
        """Checkpoints (rescanned when due) and the probe (started when due) of a path that
        answered."""
        scan: threading.Thread | None = None
        with watch.lock:
            if not is_dir or state.kind == "pseudo":  # (no checkpoints in /proc, /sys)
                watch.checkpoints = None
            elif watch.scan_due():
                watch.checkpoints_at = time.monotonic()
                watch.scanned_mtime = watch.dir_mtime
                scan = watch.scan_thread = threading.Thread(
                    target=self._run_scan,
                    args=(
                        watch,
                        actual.mountpoint,
                        mounts_below(watch.key, mounts),
                        here,
                        watch.mount,
                    ),
                    name=f"trainwatch-scan {watch.key}",
                    daemon=True,
                )
            state.checkpoints = watch.checkpoints
        if scan is not None:
            scan.start()
        if self.probe_enabled and probes_allowed(state) and watch.probe_due(self.defaults, here):
            self._submit_probe(watch, actual)

    def _look_here(
        self, watch: Watch, state: PathState, entry: MountEntry, mounts: list[MountEntry]
    ) -> bool:
        """Look at a path on a mount that cannot hang from this thread; False when that is
        not safe this time (a symlink or another mount on the way), so the guard looks."""
        try:
            raw = look_without_following(watch.key, entry)
        except OSError as exc:  # ELOOP, EACCES...: the same answer the helper would give
            state.error = describe(exc)
            return True
        if raw is None:
            watch.real = None  # not a plain path on this mount (any more): guarded looks
            return False
        self._tick_one(watch, state, entry, mounts, raw)
        return True

    def collect(self, sample: Sample) -> None:
        timeout = self.defaults.mount_timeout_s
        deadline = time.monotonic() + timeout
        with self._lock:
            watches = list(self._watches.values())
        if not watches:
            return
        try:
            mounts = read_mounts()
        except OSError as exc:
            sample.notes[self.name] = f"cannot read /proc/self/mountinfo: {describe(exc)}"
            mounts = []
        if mounts is not self._facts_of_table:  # the table changed: so may have the facts
            self._facts, self._facts_of_table = {}, mounts
        states = {watch.key: PathState(path=watch.key) for watch in watches}
        answered, asked = self._look_all(watches, states, mounts)
        if asked:
            wait_for([f for _, f in asked], timeout=max(0.0, deadline - time.monotonic()))
        answered.update(id(w) for w, f in asked if f.done())
        for watch in watches:
            self._report(watch, states[watch.key], id(watch) in answered, sample)

    def _look_all(
        self, watches: list[Watch], states: dict[str, PathState], mounts: list[MountEntry]
    ) -> tuple[set[int], list[tuple[Watch, Future[None]]]]:
        """Look at every path: here where safe, else ask its guard on the pool. Returns the
        id() of the watches answered already and the looks still to wait for."""
        asked: list[tuple[Watch, Future[None]]] = []
        answered: set[int] = set()  # id() of the watches looked at in this tick
        for watch in watches:
            state = states[watch.key]
            entry = self._entry(watch, mounts) if mounts else None
            if entry is None:
                state.error = "no mount found for this path"
                answered.add(id(watch))
                continue
            watch.moved_to(mount_key(entry))  # an unmount: the facts of before go
            facts = self._facts_of(entry, mounts)
            facts.apply(state)
            if (
                facts.answers_locally
                and self._host_local  # else the guard, which finds host paths (core.hostfs)
                and watch.real == watch.key
                and self._look_here(watch, state, entry, mounts)
            ):
                answered.add(id(watch))
            elif watch.asked is None or watch.asked.done():
                # (a look still running from an earlier tick waits for a stuck mount: this
                # tick reports that below instead of queueing another one behind it)
                watch.asked = self._submit(self._tick_one, watch, state, entry, mounts)
                if watch.asked is not None:
                    asked.append((watch, watch.asked))
        return answered, asked

    def _report(self, watch: Watch, state: PathState, answered: bool, sample: Sample) -> None:
        """One path's state into ``sample``, with its latest probe and its quota note."""
        if not answered:
            # no look of this tick came back: the guard's own timeout ends a moment
            # later (or ended in an earlier tick); report what it says
            timeout = self.defaults.mount_timeout_s
            state = replace(
                state,
                responsive=False,
                error=f"no answer within {timeout:.1f} s ({INSPECT_WHAT})",
            )
        if state.responsive and self.probe_enabled:
            with watch.lock:
                state.probe = watch.probe
            if state.read_only:
                state.probe = ProbeResult(None, None, 0, error=READ_ONLY)
        sample.paths[watch.key] = state
        if watch.quota_note is not None:
            note, watch.quota_note = watch.quota_note, None
            said = sample.notes.get("quota")
            if not said or note not in said:  # two paths on one filesystem: said once
                sample.notes["quota"] = "; ".join(filter(None, (said, note)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._watches.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._own_guard:
            self.guard.close()
