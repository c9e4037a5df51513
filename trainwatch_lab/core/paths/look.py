"""One look at a path: the helper's ``inspect`` answer (or the same found from our own
thread where that is safe) into a PathState, the checkpoint scan in its own lane, and
``inspect_path``, the full look that ``check`` makes.

Everything that touches the path goes through core.guard.guard, so a dead mount costs at most the
timeout once and nothing after that until it answers again: the path is then reported
``responsive=False``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Any

from .. import hostfs
from ..defaults import DEFAULTS, Defaults
from ..guard.guard import MountGuard, MountUnresponsive, WorkerFailed, WorkerUnavailable
from ..model import CheckpointInfo, PathState, ProbeResult
from ..storage.inspect import inspect_answer
from ..storage.mount_facts import apply_mount
from ..storage.mounts import MountEntry, mount_for_path, read_mounts
from ..storage.probe import READ_ONLY, probe_with_evidence
from ..storage.quota import apply_quota, binding, read_quotas
from ..storage.space import space_fields
from .names import SPECIAL_FILE_TYPES, correct_mount, judge, normalise
from .written import Written

INSPECT_WHAT = "statvfs"  # the user reads "no answer within 2.0 s (statvfs)"
SCAN_LANE = "checkpoints"


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
    raw = _in_scan_lane(
        guard,
        mountpoint,
        "scan_checkpoints",
        "checkpoint scan",
        key,
        d,
        skip_dirs=sorted(skip_dirs),
    )
    return CheckpointInfo(**raw) if raw else None


def written_since_guarded(
    guard: MountGuard,
    mountpoint: str,
    key: str,
    since: float,
    d: Defaults,
    before: dict[str, list[int]] | None = None,
) -> Written:
    """The files written under ``key`` since ``since`` (core.paths.written), each counted by
    what it grew past ``before``, listed by the checkpoint scan's helper with its budget.
    Raises as ``MountGuard.call``."""
    raw = _in_scan_lane(
        guard,
        mountpoint,
        "written_since",
        "listing of the files written",
        key,
        d,
        since=since,
        before=before,
    )
    return Written(**raw)


def file_sizes_guarded(
    guard: MountGuard, mountpoint: str, key: str, d: Defaults
) -> dict[str, list[int]]:
    """The sizes of the files under ``key`` (core.paths.written.file_sizes), in the same
    lane and budget. Raises as ``MountGuard.call``."""
    return _in_scan_lane(guard, mountpoint, "file_sizes", "listing of the file sizes", key, d)


def _in_scan_lane(
    guard: MountGuard, mountpoint: str, op: str, what: str, key: str, d: Defaults, **kw: Any
) -> Any:
    """``op`` on ``key`` in the mount's scan lane, within the scan budget (the helper stops
    there and answers what it saw) plus the mount timeout for the answer to come back."""
    return guard.call(
        scan_key(mountpoint),
        op,
        lane=SCAN_LANE,
        mount=mountpoint,  # a lane of the mount's one helper, stuck on a key of its own
        timeout=d.checkpoint_scan_budget_s + d.mount_timeout_s,
        what=what,
        directory=key,
        budget_s=d.checkpoint_scan_budget_s,
        **kw,
    )


def look_without_following(path: str, mount: MountEntry) -> dict[str, Any] | None:
    """What the helper's ``inspect`` answers, found from our own thread without following a
    symlink or leaving ``mount``: every component below the mount point is lstat'ed, then
    the deepest existing one statvfs'ed. None as soon as a component is a symlink or sits
    on another device: such a path may lead onto a mount that hangs, and the guard must
    look instead. For mounts that cannot hang only (``blockdev.answers_locally``)."""
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
    # a host's root seen through a read-only mount (an agent in a container, core.hostfs)
    # says ST_RDONLY of every path: there only the host's mount table tells
    if hostfs.current().local:
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


def read_quota(entry: MountEntry, raw: dict[str, Any], pid: int | None = None) -> dict[str, Any]:
    """``read_quotas`` (of ``pid``'s writes) where ``raw`` (a local look) was made, from this
    thread: for mounts that cannot hang only. A failure is "no quota" with the reason, never
    a path error."""
    try:
        return read_quotas(raw["target"], device=quota_device(entry), pid=pid)
    except OSError as exc:
        return {"quotas": [], "none": f"cannot read it: {describe(exc)}"}


def probes_allowed(state: PathState) -> bool:
    """Whether a probe may write for this path: storage that takes writes (never a kernel
    pseudo-filesystem, a device node, a FIFO or a socket, never read-only)."""
    return not (state.read_only or state.kind == "pseudo" or state.file_type in SPECIAL_FILE_TYPES)


def describe(exc: BaseException) -> str:
    """An error as the user reads it: the OS's words where there are some."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def inspect_path(
    path: str,
    defaults: Defaults = DEFAULTS,
    probe: bool = True,
    guard: MountGuard | None = None,
    *,
    sys_root: str | None = None,
) -> PathState:
    """One full look at ``path``. Bounded by ``defaults.mount_timeout_s`` (plus the probe's
    ``probe_budget_s + mount_timeout_s`` when probing); never hangs on a dead mount."""
    state = PathState(path=normalise(path))
    own = guard is None
    g = guard if guard is not None else MountGuard(defaults.mount_timeout_s)
    try:
        _inspect_into(state, g, defaults, probe, sys_root or hostfs.current().sysfs)
        return state
    finally:
        if own:
            g.close()


def _inspect_into(
    state: PathState, g: MountGuard, defaults: Defaults, probe: bool, sys_root: str
) -> None:
    """``inspect_path``'s look: mount, inspect answer, quota, checkpoints, then the probe."""
    key = state.path
    try:
        mounts = read_mounts()
        entry = mount_for_path(key, mounts)
    except (OSError, LookupError) as exc:
        state.responsive = False  # we could not even ask: never "ok"
        state.error = f"cannot read the mount table: {describe(exc)}"
        return
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
        state.error = describe(exc)
        return
    except (MountUnresponsive, WorkerUnavailable, WorkerFailed) as exc:
        # no answer (or no helper to ask): we cannot tell, which is never "ok"
        state.responsive, state.error = False, str(exc)
        return
    actual = correct_mount(entry, raw, key, mounts)
    if actual is not entry:
        apply_mount(state, actual, mounts, sys_root)
    apply_inspect(state, raw)
    if state.error is not None:  # no such path can exist (a file is in the way)
        return
    if not (state.read_only or state.kind == "pseudo") and raw.get("quota"):
        apply_quota(state, binding(raw["quota"], actual.mountpoint))
    if raw["exists"] and raw["is_dir"] and state.kind != "pseudo":
        # no checkpoint information is all a failed scan costs, never "unresponsive"
        with contextlib.suppress(MountUnresponsive, OSError, WorkerUnavailable, WorkerFailed):
            state.checkpoints = scan_checkpoints_guarded(
                g, actual.mountpoint, key, defaults, mounts_below(key, mounts)
            )
    if probe and (state.read_only or probes_allowed(state)):  # never a FIFO, /proc...
        _probe_into(state, g, actual.mountpoint, defaults)


def _probe_into(state: PathState, g: MountGuard, mountpoint: str, defaults: Defaults) -> None:
    """The latency probe's result into ``state`` (read-only: said, nothing written)."""
    if state.read_only:
        state.probe = ProbeResult(None, None, 0, error=READ_ONLY)
        return
    try:
        state.probe = probe_with_evidence(g, mountpoint, state.path, defaults)
    except MountUnresponsive as exc:
        state.responsive, state.error = False, str(exc)
    except (OSError, WorkerUnavailable, WorkerFailed) as exc:
        state.probe = ProbeResult(None, None, 0, error=describe(exc))
