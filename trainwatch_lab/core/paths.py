"""What we know about a watched path: its mount, kind, device, space, checkpoints and latency.

The mount table and /sys are read here (they never block); everything that touches the path
goes through core.guard, so a dead mount costs at most the timeout once and nothing after
that until it answers again: the path is then reported ``responsive=False``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field, replace
from typing import Any

from .defaults import DEFAULTS, Defaults
from .guard import (
    MountGuard,
    MountUnresponsive,
    WorkerFailed,
    WorkerUnavailable,
    default_guard,
)
from .model import CheckpointInfo, MountKind, PathState, ProbeResult, Sample
from .mounts import (
    MountEntry,
    answers_locally,
    block_device_for,
    classify,
    is_network_block,
    is_pseudo,
    mount_for_dev,
    mount_for_path,
    overlay_backing,
    physical_disks,
    read_mounts,
)
from .probe import READ_ONLY, probe_with_evidence
from .quota import apply_quota, binding, read_quotas
from .space import scan_checkpoints, space_fields
from .worker import inspect_answer

CHECKPOINT_RESCAN_S = 10.0  # a directory listing per tick would be wasteful on a share
# Where the directory's mtime is known each tick (paths looked at locally), a directory
# that has not changed is rescanned only this long after its last change (the newest
# checkpoint may still be growing) and then every CHECKPOINT_IDLE_RESCAN_S: saves land
# below the watched directory (lightning_logs/version_0/checkpoints/, HF's checkpoint-N/)
# without touching its mtime, and a new save must not go unseen for long.
CHECKPOINT_SETTLE_S = 60.0
CHECKPOINT_IDLE_RESCAN_S = 30.0
PROBE_RETRY_S = 10.0  # a failed probe is retried this soon, not after probe_every_s
INSPECT_WHAT = "statvfs"  # the user reads "no answer within 2.0 s (statvfs)"
SCAN_LANE = "checkpoints"
# a filesystem that answered "no quota" is asked again this much later (quotas turned on)
QUOTA_RECHECK_S = 60.0


def scan_key(mountpoint: str) -> str:
    """The guard key of a mount's checkpoint scan. Not the mount point itself: the guard
    marks a key stuck when a call on it times out, and a long listing on a slow-but-alive
    share must never make the per-tick statvfs (hence the path) look unresponsive."""
    return f"{mountpoint} (checkpoint scan)"


def mounts_below(key: str, mounts: list[MountEntry]) -> frozenset[str]:
    """Mount points under ``key``: a checkpoint scan does not enter them (another
    filesystem, maybe a share that hangs)."""
    below = key.rstrip("/") + "/"
    return frozenset(m.mountpoint for m in mounts if m.mountpoint.startswith(below))


def scan_checkpoints_guarded(
    guard: MountGuard,
    mountpoint: str,
    key: str,
    d: Defaults,
    skip_dirs: frozenset[str] = frozenset(),
) -> CheckpointInfo | None:
    """The checkpoint scan in its own helper, with its own budget: the scan stops after
    ``checkpoint_scan_budget_s`` and reports what it saw. Raises as ``MountGuard.call``."""
    raw = guard.call(
        scan_key(mountpoint),
        "scan_checkpoints",
        lane=SCAN_LANE,
        timeout=d.checkpoint_scan_budget_s + d.mount_timeout_s,
        what="checkpoint scan",
        directory=key,
        budget_s=d.checkpoint_scan_budget_s,
        skip_dirs=sorted(skip_dirs),
    )
    return CheckpointInfo(**raw) if raw else None


def normalise(path: str) -> str:
    """The key of a path everywhere (no realpath: it stats, and may hang on a dead mount)."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}


def printable(text: str) -> str:
    """``text`` safe for one line of a terminal or a notebook: control characters (a newline
    in a file name breaks a table), backslashes and bytes that are not UTF-8 (kept by
    surrogateescape, they would fail to print at all) written as backslash escapes."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)


# what ``inspect`` says of a path that holds no data: never probed, verdict "not-storage"
SPECIAL_FILE_TYPES = frozenset(
    {"character device", "block device", "FIFO", "socket", "special file"}
)


@dataclass(frozen=True)
class Judgement:
    """What a path that may not exist yet is, for every surface alike: the check's verdict
    and note, and whether the notebook and the panel may watch it (``refusal``)."""

    key: str
    exists: bool
    checked_at: str | None  # the path, or its nearest existing ancestor; None: impossible
    file_type: str | None  # of the path itself; None when it does not exist (yet)
    impossible: str | None  # why no such path can ever exist, e.g. a file is in the way
    not_storage: str | None  # what it is instead of storage: "a FIFO", "... on proc ..."
    note: str | None  # the one line the user reads beside the numbers

    @property
    def refusal(self) -> str | None:
        """One line when nothing can ever be watched there, else None."""
        if self.impossible is not None:
            return f"{self.key} {self.impossible}"
        if self.not_storage is not None:
            return f"{self.key} is not storage: {self.not_storage}"
        return None


def judge(key: str, raw: dict[str, Any], fstype: str | None) -> Judgement:
    """The one rule for a path that may not exist yet, from the ``inspect`` answer and the
    filesystem it is on: a logdir about to be created is judged (and probed) at its nearest
    existing ancestor, the same filesystem by construction; a file in the way makes it
    impossible; a device node, a FIFO, a socket or a kernel pseudo-filesystem is no storage.
    """
    target, exists = raw["target"], bool(raw["exists"])
    found = raw.get("file_type") or ("directory" if raw["is_dir"] else "file")
    if not exists and not raw["is_dir"]:
        why = f"cannot exist: {target} is a {found}, not a directory"
        return Judgement(key, False, None, None, why, None, None)
    what = f"a {found}" if exists and found in SPECIAL_FILE_TYPES else None
    if is_pseudo(fstype):
        what = f"{'a ' + found if exists else 'a path'} on {fstype} (a kernel pseudo-filesystem)"
    notes = [] if exists else [f"not created yet; checked at {target}"]
    if what is not None:
        notes.append(f"{what}: not storage, nothing written")
    note = "; ".join(notes) or None
    return Judgement(key, exists, target, found if exists else None, None, what, note)


@dataclass(frozen=True)
class Located:
    """Whether a path exists, and if not, its nearest existing ancestor."""

    exists: bool
    nearest: str  # the path itself when it exists
    nearest_is_dir: bool  # False: the path cannot be created (a file is in the way)
    realpath: str  # of ``nearest``
    judgement: Judgement | None = None  # see ``judge``: the note, the refusal

    @property
    def note(self) -> str | None:
        return self.judgement.note if self.judgement is not None else None

    @property
    def refusal(self) -> str | None:
        return self.judgement.refusal if self.judgement is not None else None


def locate(path: str, guard: MountGuard | None = None, timeout: float | None = None) -> Located:
    """``os.path.exists`` and friends, through the guard: safe on a kernel's main thread or
    an event loop even when the mount is dead (raises MountUnresponsive within ``timeout``).
    A thread of our own stuck in ``stat`` would instead stay stuck, and keep the process
    from exiting, until the server answers. Judged (``judge``) on the mount the helper
    really found (symlinks followed); raises OSError for ELOOP, ENAMETOOLONG, EACCES."""
    key = normalise(path)
    g = guard if guard is not None else default_guard()
    mounts = read_mounts()
    entry = mount_for_path(key, mounts)
    raw = g.call(entry.mountpoint, "inspect", timeout=timeout, what="stat", path=key)
    actual = correct_mount(entry, raw, key, mounts)
    return Located(
        raw["exists"], raw["target"], raw["is_dir"], raw["realpath"], judge(key, raw, actual.fstype)
    )


@dataclass(frozen=True)
class MountFacts:
    """What the mount table and /sys say about one mount (no syscall on the mount itself).
    Fixed for the life of a mount, so the paths source works it out once per mount."""

    mountpoint: str
    fstype: str
    source: str
    kind: MountKind
    read_only: bool
    device: str | None
    disks: tuple[str, ...]  # the whole disks that hold its data (mounts.physical_disks)
    shared: bool
    answers_locally: bool  # see mounts.answers_locally: may be inspected on our own thread

    @classmethod
    def of(cls, entry: MountEntry, mounts: list[MountEntry], sys_root: str = "/sys") -> MountFacts:
        kind = classify(entry)
        device = block_device_for(entry, sys_root, mounts=mounts)
        backing = overlay_backing(entry, mounts) if kind == "overlay" else None
        return cls(
            mountpoint=entry.mountpoint,
            fstype=entry.fstype,
            source=entry.source,
            kind=kind,
            read_only=entry.read_only,
            device=device,
            disks=physical_disks(device, mounts, sys_root),
            shared=(
                kind == "shared"
                or is_network_block(device)
                or (backing is not None and classify(backing) == "shared")
            ),
            answers_locally=answers_locally(entry, device, sys_root),
        )

    def apply(self, state: PathState) -> None:
        state.mountpoint, state.fstype, state.source = self.mountpoint, self.fstype, self.source
        state.kind, state.read_only = self.kind, self.read_only
        state.device, state.shared = self.device, self.shared
        state.disks = list(self.disks)


def apply_mount(
    state: PathState, entry: MountEntry, mounts: list[MountEntry], sys_root: str = "/sys"
) -> None:
    """Fill the mount fields of ``state`` from the mount table and /sys (no syscall on it)."""
    MountFacts.of(entry, mounts, sys_root).apply(state)


def resolved_path(raw: dict[str, Any], key: str) -> str:
    """Where ``key`` really lives: the real path of its nearest existing ancestor plus the
    part that does not exist yet."""
    target, real = raw["target"], raw["realpath"]
    rest = key[len(target) :].lstrip("/") if key.startswith(target) else ""
    return os.path.join(real, rest) if rest else real


def correct_mount(
    entry: MountEntry, raw: dict[str, Any], key: str, mounts: list[MountEntry]
) -> MountEntry:
    """The mount the worker actually found (symlinks, bind mounts): by real path, confirmed
    by ``st_dev``; the string-prefix guess stays when ``st_dev`` names no mount (btrfs)."""
    real = resolved_path(raw, key)
    dev = os.makedev(*raw["st_dev"])
    try:
        guess = mount_for_path(real, mounts)
    except LookupError:
        guess = entry
    if guess.dev == dev:
        return guess
    return mount_for_dev(dev, real, mounts) or guess


def look_without_following(path: str, mount: MountEntry) -> dict[str, Any] | None:
    """What the helper's ``inspect`` answers, found from our own thread without following a
    symlink or leaving ``mount``: every component below the mount point is lstat'ed, then
    the deepest existing one statvfs'ed. None as soon as a component is a symlink or sits
    on another device: such a path may lead onto a mount that hangs, and the guard must
    look instead. For mounts that cannot hang only (``mounts.answers_locally``)."""
    root = mount.mountpoint
    if path == root:
        rest = ""
    elif path.startswith(root.rstrip("/") + "/"):
        rest = path[len(root) :].strip("/")
    else:
        return None
    current, st = root, os.lstat(root) if not rest else None
    exists = True
    for name in rest.split("/") if rest else ():
        child = os.path.join(current, name)
        try:
            child_st = os.lstat(child)
        except (FileNotFoundError, NotADirectoryError):
            exists = False  # a logdir not created yet (or a file in the way)
            break
        if stat.S_ISLNK(child_st.st_mode):
            return None
        current, st = child, child_st
        if st.st_dev != mount.dev:  # a mount stacked since the table was read, btrfs
            return None
    if st is None:  # the first component below the mount point does not exist yet
        st = os.lstat(root)
    if st.st_dev != mount.dev:
        return None
    answer = inspect_answer(current, st, exists, realpath=current)
    answer["mtime_ns"] = st.st_mtime_ns  # lets a quiet directory skip its checkpoint rescans
    return answer


def apply_space(state: PathState, st: os.statvfs_result) -> None:
    for name, value in space_fields(st).items():
        setattr(state, name, value)
    state.read_only = state.read_only or bool(st.f_flag & os.ST_RDONLY)


def apply_inspect(state: PathState, raw: dict[str, Any]) -> None:
    """The inspect answer into ``state``, judged (``judge``) on the mount ``state`` is on."""
    judged = judge(state.path, raw, state.fstype)
    state.exists, state.file_type = judged.exists, judged.file_type
    state.checked_at, state.note = judged.checked_at, judged.note
    if judged.impossible is not None:
        state.error = judged.impossible
    apply_space(state, os.statvfs_result(tuple(raw["statvfs"])))


def quota_device(entry: MountEntry) -> str | None:
    """The block device ``quotactl`` needs on kernels before ``quotactl_fd`` (5.14)."""
    return entry.source if entry.source.startswith("/dev/") else None


def read_quota(entry: MountEntry, raw: dict[str, Any]) -> dict[str, Any]:
    """``read_quotas`` where ``raw`` (a local look) was made, from this thread: for mounts
    that cannot hang only. A failure is "no quota" with the reason, never a path error."""
    try:
        return read_quotas(raw["target"], device=quota_device(entry))
    except OSError as exc:
        return {"quotas": [], "none": f"cannot read it: {_describe(exc)}"}


def probes_allowed(state: PathState) -> bool:
    """Whether a probe may write for this path: storage that takes writes (never a kernel
    pseudo-filesystem, a device node, a FIFO or a socket, never read-only)."""
    return not (state.read_only or state.kind == "pseudo" or state.file_type in SPECIAL_FILE_TYPES)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def inspect_path(
    path: str,
    defaults: Defaults = DEFAULTS,
    probe: bool = True,
    guard: MountGuard | None = None,
    *,
    sys_root: str = "/sys",
) -> PathState:
    """One full look at ``path``. Bounded by ``defaults.mount_timeout_s`` (plus the probe's
    ``probe_budget_s + mount_timeout_s`` when probing); never hangs on a dead mount."""
    key = normalise(path)
    state = PathState(path=key)
    own = guard is None
    g = guard if guard is not None else MountGuard(defaults.mount_timeout_s)
    try:
        try:
            mounts = read_mounts()
            entry = mount_for_path(key, mounts)
        except (OSError, LookupError) as exc:
            state.responsive = False  # we could not even ask: never "ok"
            state.error = f"cannot read the mount table: {_describe(exc)}"
            return state
        apply_mount(state, entry, mounts, sys_root)
        try:
            raw = g.call(
                entry.mountpoint,
                "inspect",
                timeout=defaults.mount_timeout_s,
                what=INSPECT_WHAT,
                path=key,
                quota=True,
                device=quota_device(entry),
            )
        except OSError as exc:  # ELOOP, ENAMETOOLONG...: no such path can exist here
            state.error = _describe(exc)
            return state
        except (MountUnresponsive, WorkerUnavailable, WorkerFailed) as exc:
            # no answer (or no helper to ask): we cannot tell, which is never "ok"
            state.responsive, state.error = False, str(exc)
            return state
        actual = correct_mount(entry, raw, key, mounts)
        if actual is not entry:
            apply_mount(state, actual, mounts, sys_root)
        apply_inspect(state, raw)
        if state.error is not None:  # no such path can exist (a file is in the way)
            return state
        if not (state.read_only or state.kind == "pseudo") and raw.get("quota"):
            apply_quota(state, binding(raw["quota"], actual.mountpoint))
        if raw["exists"] and raw["is_dir"] and state.kind != "pseudo":
            # no checkpoint information is all a failed scan costs, never "unresponsive"
            with contextlib.suppress(MountUnresponsive, OSError, WorkerUnavailable, WorkerFailed):
                state.checkpoints = scan_checkpoints_guarded(
                    g, actual.mountpoint, key, defaults, mounts_below(key, mounts)
                )
        if probe and (state.read_only or probes_allowed(state)):  # never a FIFO, /proc...
            if state.read_only:
                state.probe = ProbeResult(None, None, 0, error=READ_ONLY)
            else:
                try:
                    state.probe = probe_with_evidence(g, actual.mountpoint, key, defaults)
                except MountUnresponsive as exc:
                    state.responsive, state.error = False, str(exc)
                except (OSError, WorkerUnavailable, WorkerFailed) as exc:
                    state.probe = ProbeResult(None, None, 0, error=_describe(exc))
        return state
    finally:
        if own:
            g.close()


@dataclass
class _Watch:
    """Per-path memory between ticks."""

    key: str
    real: str | None = None  # resolved path from the last answer (symlinks followed)
    probe: ProbeResult | None = None
    probe_at: float | None = None
    probe_thread: threading.Thread | None = None
    checkpoints: CheckpointInfo | None = None
    checkpoints_at: float | None = None
    dir_mtime: int | None = None  # st_mtime_ns at the last local look (None: not known)
    dir_changed_at: float = 0.0  # when that mtime last changed (monotonic)
    scanned_mtime: int | None = None  # st_mtime_ns when the last scan started
    scan_thread: threading.Thread | None = None
    asked: Future[None] | None = None  # the guarded inspect of the latest tick that asked
    quota_none_until: float = 0.0  # (monotonic) no quota here: not asked again before then
    quota_note: str | None = None  # "no quota" said once: the next sample's notes carry it
    quota_said: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class PathsSource:
    """Sampler source for the watched paths (``sample.paths``).

    Per tick, one look per path (exists, st_dev, statvfs). Paths on mounts that cannot hang
    (memory filesystems, kernel filesystems on a local disk: ``mounts.answers_locally``) are
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
        sys_root: str = "/sys",
    ) -> None:
        self.defaults = defaults
        self.probe_enabled = probe
        self.sys_root = sys_root
        self._own_guard = guard is None
        self.guard = guard if guard is not None else MountGuard(defaults.mount_timeout_s)
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}
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

    def add(self, path: str) -> str:
        """Watch ``path`` (idempotent); returns its normalised key. Starts its helper and
        its first probe in the background; never touches the path on this thread."""
        key = normalise(path)
        with self._lock:
            if key in self._watches or self._closed:
                return key
            watch = self._watches[key] = _Watch(key)
        entry = self._entry(watch)
        if entry is not None:
            self.guard.prestart(entry.mountpoint)
            if self.probe_enabled and not entry.read_only and classify(entry) != "pseudo":
                self._submit_probe(watch, entry)  # (the helper refuses a FIFO, a device)
        return key

    def remove(self, path: str) -> None:
        with self._lock:
            self._watches.pop(normalise(path), None)

    def _entry(self, watch: _Watch, mounts: list[MountEntry] | None = None) -> MountEntry | None:
        try:
            mounts = mounts if mounts is not None else read_mounts()
            return mount_for_path(watch.real or watch.key, mounts)
        except (OSError, LookupError):
            return None

    # -- probes ------------------------------------------------------------------------
    def _submit_probe(self, watch: _Watch, entry: MountEntry) -> None:
        with watch.lock:
            if watch.probe_thread is not None and watch.probe_thread.is_alive():
                return
            watch.probe_at = time.monotonic()
            thread = threading.Thread(
                target=self._run_probe,
                args=(watch, entry.mountpoint),
                name=f"trainwatch-probe {watch.key}",
                daemon=True,
            )
            watch.probe_thread = thread
        thread.start()

    def _run_probe(self, watch: _Watch, mountpoint: str) -> None:
        d = self.defaults
        try:
            result = probe_with_evidence(self.guard, mountpoint, watch.key, d)
        except MountUnresponsive as exc:
            result = ProbeResult(None, None, 0, error=str(exc))
        except (OSError, WorkerUnavailable, WorkerFailed) as exc:
            result = ProbeResult(None, None, 0, error=_describe(exc))
        except Exception:
            if not (self._closed or self.guard.closed):
                raise  # a bug while running: let it show
            return  # closed under the probe (unload, exit): nobody is left to tell
        with watch.lock:
            watch.probe = result

    def _probe_due(self, watch: _Watch, local: bool) -> bool:
        d = self.defaults
        with watch.lock:
            if watch.probe_thread is not None and watch.probe_thread.is_alive():
                return False
            if watch.probe_at is None:
                return True
            every = d.local_probe_every_s if local else d.probe_every_s
            if watch.probe is not None and watch.probe.error is not None:
                every = min(every, PROBE_RETRY_S)  # e.g. the mount was dead: look again soon
            return time.monotonic() - watch.probe_at >= every

    # -- checkpoint scans --------------------------------------------------------------
    def _scan_due(self, watch: _Watch) -> bool:
        """Caller holds ``watch.lock``. See CHECKPOINT_SETTLE_S for the quiet directory."""
        if watch.scan_thread is not None and watch.scan_thread.is_alive():
            return False
        at = watch.checkpoints_at
        if at is None:
            return True
        now = time.monotonic()
        if now - at < CHECKPOINT_RESCAN_S:
            return False
        if watch.dir_mtime is None or watch.dir_mtime != watch.scanned_mtime:
            return True
        return (
            now - watch.dir_changed_at < CHECKPOINT_SETTLE_S or now - at >= CHECKPOINT_IDLE_RESCAN_S
        )

    def _run_scan(self, watch: _Watch, mountpoint: str, skip: frozenset[str], here: bool) -> None:
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
        watch: _Watch,
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
                )
            except MountUnresponsive as exc:
                state.responsive, state.error = False, str(exc)
                return
            except (OSError, WorkerUnavailable, WorkerFailed) as exc:
                state.error = _describe(exc)
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
        self, watch: _Watch, state: PathState, entry: MountEntry, raw: dict[str, Any], here: bool
    ) -> None:
        """Space left under the quota that binds (core.quota), read each tick where there is
        one: one ``quotactl`` per kind, from here when looked at locally, else by the mount's
        helper in the same round trip as the look (``inspect``'s ``quota``). No quota (or
        no way to read it) changes nothing, is said once, and is asked again only every
        QUOTA_RECHECK_S."""
        if state.read_only or state.kind == "pseudo" or time.monotonic() < watch.quota_none_until:
            return
        if not (raw["is_dir"] or raw.get("file_type") == "file"):
            return  # never open a FIFO or a device
        answer = raw.get("quota") if not here else read_quota(entry, raw)
        if answer is None:
            return  # not asked this time
        quota = binding(answer, entry.mountpoint)
        if quota is None:
            watch.quota_none_until = time.monotonic() + QUOTA_RECHECK_S
            if not watch.quota_said:
                watch.quota_said = True
                watch.quota_note = f"no quota on {entry.mountpoint}: {answer.get('none')}"
            return
        apply_quota(state, quota)

    def _after_look(
        self,
        watch: _Watch,
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
            elif self._scan_due(watch):
                watch.checkpoints_at = time.monotonic()
                watch.scanned_mtime = watch.dir_mtime
                scan = watch.scan_thread = threading.Thread(
                    target=self._run_scan,
                    args=(watch, actual.mountpoint, mounts_below(watch.key, mounts), here),
                    name=f"trainwatch-scan {watch.key}",
                    daemon=True,
                )
            state.checkpoints = watch.checkpoints
        if scan is not None:
            scan.start()
        if self.probe_enabled and probes_allowed(state) and self._probe_due(watch, here):
            self._submit_probe(watch, actual)

    def _look_here(
        self, watch: _Watch, state: PathState, entry: MountEntry, mounts: list[MountEntry]
    ) -> bool:
        """Look at a path on a mount that cannot hang from this thread; False when that is
        not safe this time (a symlink or another mount on the way), so the guard looks."""
        try:
            raw = look_without_following(watch.key, entry)
        except OSError as exc:  # ELOOP, EACCES...: the same answer the helper would give
            state.error = _describe(exc)
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
            sample.notes[self.name] = f"cannot read /proc/self/mountinfo: {_describe(exc)}"
            mounts = []
        if mounts is not self._facts_of_table:  # the table changed: so may have the facts
            self._facts, self._facts_of_table = {}, mounts
        states: dict[str, PathState] = {}
        asked: list[tuple[_Watch, Future[None]]] = []
        answered: set[int] = set()  # id() of the watches looked at in this tick
        for watch in watches:
            state = states[watch.key] = PathState(path=watch.key)
            entry = self._entry(watch, mounts) if mounts else None
            if entry is None:
                state.error = "no mount found for this path"
                answered.add(id(watch))
                continue
            facts = self._facts_of(entry, mounts)
            facts.apply(state)
            if (
                facts.answers_locally
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
        if asked:
            wait_for([f for _, f in asked], timeout=max(0.0, deadline - time.monotonic()))
        answered.update(id(w) for w, f in asked if f.done())
        for watch in watches:
            state = states[watch.key]
            if id(watch) not in answered:
                # no look of this tick came back: the guard's own timeout ends a moment
                # later (or ended in an earlier tick); report what it says
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
                sample.notes["quota"] = "; ".join(filter(None, (sample.notes.get("quota"), note)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._watches.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._own_guard:
            self.guard.close()
