"""Storage rules: turn mounts, space, probe latency and disk counters into plain warnings
(the disk-counter rule, disk-saturated, is in devices.py and listed here in its place).

Each detector is ``fn(ctx) -> Iterable[Alert]`` (see context.py), emits at most one warning per
(code, subject), and puts the measured numbers in the message and an action in the fix.
Thresholds come only from ``ctx.defaults``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator

from ..core.defaults import Defaults
from ..core.model import Alert, PathState, ProbeResult, Sample
from ..core.paths.names import short_path
from ..core.storage.fill import can_fill, filesystem_key, is_trend
from .context import Context, Detector, stateless, stateless_only
from .devices import DEVICE_DETECTORS
from .text import (
    fmt_bytes,
    fmt_clock,
    fmt_duration,
    fmt_ms,
    fmt_pct,
    fmt_rate,
    free_fraction,
    reserved_text,
)

LOCAL_FIX = (
    "Write logs and checkpoints to local disk and let trainwatch copy them to the share in the "
    "background: in Python, `SummaryWriter(local_mirror(share_dir))` (from trainwatch_lab import "
    "local_mirror); for a script you cannot change, point it at a local directory and run "
    "`trainwatch-lab mirror LOCAL_DIR SHARE_DIR` beside it (it copies every few minutes, only "
    "the bytes appended since the last copy). If the logs must go to the share directly, log "
    "less often (TensorBoard flush_secs, Lightning log_every_n_steps)."
)
# slow-mount on a share has the cause shared-mount names on the same mount (always raised
# there with it): one fix per cause, so it points there instead of saying it again
SAME_CAUSE_FIX = (
    "The share is the cause: shared-mount's fix for {mount} (log to local disk with "
    "`local_mirror`, copied in the background) cures this too."
)
FASTER_DISK_FIX = (
    "Write step-by-step logs and checkpoints to a faster disk (local NVMe, or /dev/shm for "
    "small logs) and copy them over in the background; lower the logging frequency "
    "(TensorBoard flush_secs, Lightning log_every_n_steps)."
)


def _where(p: PathState) -> str:
    """``fuse.sshfs from user@host:/dir`` — how a user recognises the mount."""
    fstype = p.fstype or "unknown filesystem"
    return f"{fstype} from {p.source}" if p.source else fstype


def storage_of(probe: ProbeResult) -> str:
    """``/var/tmp (vda)``: where a reference probe was measured."""
    where = probe.where or "local disk"
    return f"{where} ({probe.device})" if probe.device else where


def _probe_text(probe: ProbeResult | None, baseline: ProbeResult | None) -> str:
    """The measured latency, and what it was compared with: the reference measured at the
    same moment when there is one, else the cached local baseline."""
    if probe is None or probe.p50_ms is None:
        return ""
    text = f"; a 4 KiB write + fsync takes {fmt_ms(probe.p50_ms)} at the median"
    if probe.p99_ms is not None:
        text += f" ({fmt_ms(probe.p99_ms)} p99)"
    if probe.slow_runs >= 2:
        text += f" in {probe.slow_runs} probes in a row"
    ref = comparison(probe, baseline)
    if ref is not None and ref.p50_ms is not None:
        when = " measured at the same time" if ref is probe.reference else ""
        text += f", against {fmt_ms(ref.p50_ms)} on {storage_of(ref)}{when}"
    return text


def comparison(probe: ProbeResult, baseline: ProbeResult | None) -> ProbeResult | None:
    if probe.reference is not None and probe.reference.p50_ms is not None:
        return probe.reference
    return baseline if baseline is not None and baseline.p50_ms is not None else None


def _on(paths: list[str], p: PathState) -> str:
    """The filesystem the watched paths live on, as the user will recognise it:
    ``/mnt/x (where /mnt/x/ckpt and /mnt/x/logs live)``."""
    mount = p.mountpoint or paths[0]
    inside = sorted(path for path in paths if path != mount)
    if not inside:
        return mount
    names = inside[0] if len(inside) == 1 else f"{', '.join(inside[:-1])} and {inside[-1]}"
    return f"{mount} (where {names} {'lives' if len(inside) == 1 else 'live'})"


def _there(paths: list[str], p: PathState) -> str:
    """``; …/runs/exp1 lives there``: the watched paths on a filesystem, said after the
    numbers and by their last two names, so that a one-line view cut at 820 px keeps the
    rate and the time to full (a mirror's scratch path ran 60 characters; the full paths
    are in the subject and the panel's path list)."""
    mount = p.mountpoint or paths[0]
    inside = sorted(short_path(path, 2) for path in paths if path != mount)
    if not inside:
        return ""
    names = inside[0] if len(inside) == 1 else f"{', '.join(inside[:-1])} and {inside[-1]}"
    return f"; {names} {'lives' if len(inside) == 1 else 'live'} there"


def _watched(sample: Sample) -> Iterator[tuple[str, PathState]]:
    yield from sorted(sample.paths.items())


def _filesystems(sample: Sample) -> Iterator[tuple[list[str], PathState]]:
    """The answering watched paths grouped by filesystem (core.storage.fill's key: the same free
    space), each with the first one's state: a fact about free space is one warning per
    filesystem, naming every watched path on it (sorted), with the path watched longest
    as its subject (paths keep the order they were added: a new one changes no subject)."""
    yield from _grouped(sample, lambda path, p: filesystem_key(path, p) if p.responsive else None)


def _mounts(sample: Sample, answering: bool) -> Iterator[tuple[list[str], PathState]]:
    """The watched paths grouped by mount, those that answer or those that do not: that a
    mount is shared, or dead, is one fact, however many watched paths live there."""
    yield from _grouped(
        sample, lambda path, p: (p.mountpoint or path) if p.responsive == answering else None
    )


def _grouped(
    sample: Sample, key_of: Callable[[str, PathState], object]
) -> Iterator[tuple[list[str], PathState]]:
    groups: dict[object, list[str]] = {}
    for path, p in sample.paths.items():
        key = key_of(path, p)
        if key is not None:
            groups.setdefault(key, []).append(path)
    for paths in sorted(groups.values()):
        yield [paths[0], *sorted(paths[1:])], sample.paths[paths[0]]


def _named(paths: list[str], p: PathState) -> str:
    """One watched path as itself; several by the mount they share (``_on``)."""
    return paths[0] if len(paths) == 1 else _on(paths, p)


# -- mounts ---------------------------------------------------------------------------


@stateless
def mount_unresponsive(ctx: Context) -> Iterator[Alert]:
    """The filesystem did not answer statfs/probe in time: anything touching it may hang."""
    for paths, p in _mounts(ctx.sample, answering=False):
        mount = p.mountpoint or paths[0]
        yield Alert(
            code="mount-unresponsive",
            severity="critical",
            subject=paths[0],
            message=(
                f"{_named(paths, p)} ({_where(p)}, mounted at {mount}) did not answer within "
                f"{fmt_duration(ctx.defaults.mount_timeout_s)}; every process that touches it, "
                "your training loop included, can hang there."
            ),
            fix=(
                f"Check the server and the network behind {p.source or mount}; until it answers, "
                "write logs and checkpoints to local disk. If it stays dead, detach it with "
                f"`umount -l {mount}`."
            ),
        )


@stateless
def shared_mount(ctx: Context) -> Iterator[Alert]:
    """A watched path on a network/shared filesystem: every fsync is a network round trip."""
    for paths, p in _mounts(ctx.sample, answering=True):
        if not p.shared:
            continue
        yield Alert(
            code="shared-mount",
            severity="warning",
            subject=paths[0],
            message=(
                f"{_named(paths, p)} is on a shared filesystem ({_where(p)})"
                f"{_probe_text(p.probe, ctx.baseline)}"
                "; logs and checkpoints written there step by step can stall training."
            ),
            fix=LOCAL_FIX,
        )


def same_storage(p: PathState, ref: ProbeResult) -> bool:
    """A path cannot be slower than the storage it lives on (a loop-mounted image on the
    reference's disk lives there too: their disks overlap)."""
    if p.device is not None and p.device == ref.device:
        return True
    if set(p.disks) & set(ref.disks):
        return True
    where = ref.where or ""
    return bool(p.mountpoint) and (where == p.mountpoint or where.startswith(f"{p.mountpoint}/"))


def is_slow(p: PathState, baseline: ProbeResult | None, defaults: Defaults) -> bool:
    """The slow-mount rule: ``slow_min_probes`` probes in a row over the limits, on storage
    that differs from what it is compared with.

    A network or FUSE mount differs by nature: p50 over ``slow_p50_ms``, or
    ``slow_vs_baseline`` times the local reference. A local disk counts only against another
    device measured at the same moment that stayed fast (under ``slow_reference_fast_ms``):
    a disk that is merely busy, slowing every path on the machine, is disk-saturated's
    business, and a path on the reference's own device is never compared with itself.
    """
    probe = p.probe
    if probe is None or probe.p50_ms is None or probe.slow_runs < defaults.slow_min_probes:
        return False
    ref = comparison(probe, baseline)
    if ref is not None and same_storage(p, ref):
        return False
    if not p.shared:
        fresh = probe.reference
        if fresh is None or fresh.p50_ms is None or p.device is None or fresh.device is None:
            return False  # no other storage measured at the same moment: no evidence
        if fresh.p50_ms >= defaults.slow_reference_fast_ms:
            return False  # the whole machine is slow right now, not this disk
    if probe.p50_ms >= defaults.slow_p50_ms:
        return True
    base = ref.p50_ms if ref is not None else None
    return (
        base is not None
        and base > 0
        and probe.p50_ms >= defaults.slow_ratio_min_ms
        and probe.p50_ms >= defaults.slow_vs_baseline * base
    )


@stateless
def slow_mount(ctx: Context) -> Iterator[Alert]:
    for path, p in _watched(ctx.sample):
        if not p.responsive or not is_slow(p, ctx.baseline, ctx.defaults):
            continue
        assert p.probe is not None and p.probe.p50_ms is not None
        ref = comparison(p.probe, ctx.baseline)
        base = ref.p50_ms if ref is not None else None
        ratio = f" ({p.probe.p50_ms / base:.0f}x slower)" if base else ""
        yield Alert(
            code="slow-mount",
            severity="warning",
            subject=path,
            message=(
                f"Writes to {path} ({_where(p)}) are slow{_probe_text(p.probe, ctx.baseline)}"
                f"{ratio}."
            ),
            fix=(
                SAME_CAUSE_FIX.format(mount=p.mountpoint or path) if p.shared else FASTER_DISK_FIX
            ),
        )


# -- space ----------------------------------------------------------------------------


def almost_full_limit(p: PathState, defaults: Defaults) -> float | None:
    """Free bytes at or under which the disk counts as almost full (None: the rule does not
    apply): ``full_fraction`` of the space a user can have as df counts it (used + avail,
    so df's Use% reads 90 % or more), or ``full_bytes`` on a disk larger than that."""
    if p.read_only or not p.total_bytes or p.avail_bytes is None:
        return None
    usable = p.used_bytes if p.used_bytes is not None else p.total_bytes - p.avail_bytes
    limit = defaults.full_fraction * (usable + p.avail_bytes)
    if p.total_bytes > defaults.full_bytes:  # on a tiny tmpfs "under 2 GiB" is always true
        limit = max(limit, float(defaults.full_bytes))
    return limit


def _room(paths: list[str], p: PathState) -> str:
    """Where the space is counted: "on /data (where /data/run lives)", or the quota that
    binds there ("in your quota on /mnt/lustre") when that leaves less than the filesystem."""
    if p.quota:
        return f"in {p.quota['name']} (for {', '.join(paths)})"
    return f"on {p.mountpoint or paths[0]}"


QUOTA_FIX = " Or ask for a bigger quota (quota -s / lfs quota -h show it)."


def _full_error(p: PathState) -> str:
    return "Disk quota exceeded" if p.quota else "No space left on device"


def _inodes_low(p: PathState, defaults: Defaults) -> float | None:
    """Share of inodes left when at or under ``full_fraction`` (many small files also end in
    ENOSPC with bytes to spare); None when fine or unknown (btrfs reports no inodes)."""
    if p.read_only or not p.inodes_total or p.inodes_free is None:
        return None
    share = p.inodes_free / p.inodes_total
    return share if share <= defaults.full_fraction else None


@stateless
def disk_almost_full(ctx: Context) -> Iterator[Alert]:
    d = ctx.defaults
    for paths, p in _filesystems(ctx.sample):
        limit = almost_full_limit(p, d)
        inodes = _inodes_low(p, d)
        space_low = limit is not None and p.avail_bytes is not None and p.avail_bytes <= limit
        if not space_low and inodes is None:
            continue
        parts, fixes, shares = [], [], []
        if space_low:
            assert limit is not None and p.total_bytes and p.avail_bytes is not None
            share = free_fraction(p)
            if share is None:
                share = p.avail_bytes / p.total_bytes
            shares.append(share)
            reserved = reserved_text(p)
            parts.append(
                f"Only {fmt_bytes(p.avail_bytes)} of {fmt_bytes(p.total_bytes)} "
                f"({fmt_pct(share)}) is free {_room(paths, p)}"
                + (f" ({reserved})" if reserved else "")
                + ("" if p.quota else _there(paths, p))
                + "."
            )
            fixes.append(
                f"Free at least {fmt_bytes(limit - p.avail_bytes)} (old runs, old checkpoints) "
                "or keep fewer checkpoints (Lightning save_top_k, HF save_total_limit), or point "
                "the output at a disk with more room."
            )
        if inodes is not None:
            shares.append(inodes)
            parts.append(
                f"Only {p.inodes_free:,} of {p.inodes_total:,} inodes ({fmt_pct(inodes)}) are "
                f"left {_room(paths, p)}: every new file needs one."
            )
            fixes.append(
                "Delete or pack small files (old event files, per-step images; tar or a "
                "single HDF5/Parquet file instead of one file per sample)."
            )
        yield Alert(
            code="disk-almost-full",
            severity="critical" if min(shares) <= d.full_critical_fraction else "warning",
            subject=paths[0],
            message=" ".join(parts),
            fix=" ".join(fixes) + (QUOTA_FIX if p.quota else ""),
        )


def disk_filling(ctx: Context) -> Iterator[Alert]:
    """Free space running out within the horizon, at a rate that has lasted (core.storage.fill)."""
    d = ctx.defaults
    for paths, p in _filesystems(ctx.sample):
        fill = p.fill
        if fill is None or not can_fill(p) or not is_trend(fill, d):
            continue
        ttf = fill.seconds_to_full
        if ttf is None or not math.isfinite(ttf) or ttf > d.fill_horizon_s:
            continue
        assert fill.rate_bps is not None
        critical = ttf < d.fill_critical_s
        yield Alert(
            code="disk-filling",
            severity="critical" if critical else "warning",
            subject=paths[0],
            message=(
                f"{p.mountpoint or paths[0]} is filling at {fmt_rate(fill.rate_bps)}: "
                f"{fmt_bytes(p.avail_bytes)} left{' ' + _room(paths, p) if p.quota else ''}, "
                f"full in about {fmt_duration(ttf)} (around {fmt_clock(ctx.sample.t + ttf)}) "
                f"at this rate, steady for {fmt_duration(fill.trend_s)}"
                f"{'' if p.quota else _there(paths, p)}."
            ),
            fix=(
                "Free space or move the output to a bigger disk before then: delete old runs, "
                "keep fewer checkpoints (save_top_k / save_total_limit) or save less often."
            ),
        )


# what save_checkpoint and the framework callbacks can do about it (fix.checkpoint.room and
# .retention; all off by default; the Hugging Face Trainer names its save dirs itself: no
# fallback there)
SAVE_FIX = (
    " Saving through save_checkpoint or a TrainWatchCallback (Lightning, Hugging Face, Keras), "
    "keep=N makes room from its own older saves, fallback=DIR saves elsewhere (not with the "
    "Hugging Face Trainer) and on_full='wait' pauses the save until there is room; all are off "
    "by default."
)


@stateless
def checkpoint_wont_fit(ctx: Context) -> Iterator[Alert]:
    """The newest checkpoint is bigger than the free space: the next save dies with ENOSPC.
    One warning per filesystem, about the biggest save that does not fit there."""
    for paths, first in _filesystems(ctx.sample):
        if first.avail_bytes is None or first.read_only:
            continue
        held = [(path, ck) for path in paths if (ck := ctx.sample.paths[path].checkpoints)]
        too_big = [(path, ck) for path, ck in held if ck.newest_bytes > first.avail_bytes]
        if not too_big:
            continue
        path, ck = max(too_big, key=lambda item: item[1].newest_bytes)
        p = ctx.sample.paths[path]
        assert p.avail_bytes is not None
        when = ""
        if ck.cadence_s:
            due = ck.newest_mtime + ck.cadence_s - ctx.sample.t
            every = fmt_duration(ck.cadence_s)
            if due > 0:
                when = (
                    f" Saves come every {every}; the next is due in about {fmt_duration(due)} "
                    f"(around {fmt_clock(ck.newest_mtime + ck.cadence_s)})."
                )
            else:
                when = f" Saves come every {every}; the next one is due now."
        name = os.path.basename(ck.newest_path)
        where = f" {_room([path], p)}" if p.quota else ""
        yield Alert(
            code="checkpoint-wont-fit",
            severity="critical",
            subject=path,
            message=(
                f"The newest checkpoint in {path} ({name}) is {fmt_bytes(ck.newest_bytes)} but "
                f"only {fmt_bytes(p.avail_bytes)} is free{where}; the next save will fail with "
                f"'{_full_error(p)}' and can leave a truncated file.{when}"
            ),
            fix=(
                f"Free at least {fmt_bytes(ck.newest_bytes - p.avail_bytes)} (delete older "
                "checkpoints) or keep fewer checkpoints (save_top_k / save_total_limit), or "
                "save to a disk with more room." + (QUOTA_FIX if p.quota else "") + SAVE_FIX
            ),
        )


STORAGE_DETECTORS: list[Detector] = [
    mount_unresponsive,
    shared_mount,
    slow_mount,
    disk_almost_full,
    disk_filling,
    *DEVICE_DETECTORS,
    checkpoint_wont_fit,
]

# Rules that need only the current sample (no history): what a one-shot ``check`` can run.
STATELESS_STORAGE_DETECTORS: list[Detector] = stateless_only(STORAGE_DETECTORS)
