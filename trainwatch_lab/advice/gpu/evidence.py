"""The storage evidence both GPU rules quote: where the training loop waits, what the
process and the disks did in the window, and whether storage is to blame.

Why a module of its own: gpu-stalled (advice.gpu.stall) and gpu-starved (advice.gpu.detectors) must
say the same thing about the same window, and storage is blamed only with evidence - the
main thread (or a training process's) blocked on a file, a path that does not answer or
whose write+fsync probe is slow, or a busy disk; a path merely being on a share is not.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from ...core.history import History
from ...core.model import (
    GpuState,
    PathState,
    Sample,
    TrainingProcess,
    path_devices,
    watched_devices,
)
from ..context import Context
from ..io_bound import KINDS
from ..storage import LOCAL_FIX, is_slow
from ..text import fmt_duration, fmt_ms, fmt_rate

# one list of system calls per kind (advice.io_bound's), so that the rules never disagree on
# what a read is: blocked in one of READ_CALLS, a thread waits on data
_FLUSHES = KINDS["sync"]
READ_CALLS = KINDS["read"]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(value: float) -> str:
    return f"{value:.0f} %"


@dataclass
class Evidence:
    """What storage did in the window, as a clause, and whether it looks like the culprit."""

    clause: str
    culprit: PathState | None
    blocked: str | None  # "the training loop is blocked in f.py:flush writing /x (fuse.sshfs)"
    healthy: bool
    disk_busy: bool


# -- the storage evidence shared by both rules -----------------------------------------------
def _is_under(path: str, root: str | None) -> bool:
    if not root:
        return False
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def _owner(path: str, sample: Sample) -> PathState | None:
    """The watched path (or its mount) that contains ``path``; the most specific wins."""
    best: tuple[int, PathState] | None = None
    for key, p in sample.paths.items():
        for root in (key, p.mountpoint):
            if root and _is_under(path, root) and (best is None or len(root) > best[0]):
                best = (len(root), p)
    return best[1] if best else None


def _fstype_of(path: str, owner: PathState | None) -> str | None:
    if owner is not None and owner.fstype:
        return owner.fstype
    try:  # /proc/self/mountinfo only: never touches the (maybe dead) filesystem
        from ...core.storage.mounts import mount_for_path, read_mounts

        return mount_for_path(path, read_mounts()).fstype
    except Exception:
        return None


def _short(path: str, limit: int = 28) -> str:
    """Keep the directory (it names the mount); shorten a long file name."""
    head, name = os.path.split(path)
    if len(name) > limit:
        name = name[: limit - 4] + "…"
    return os.path.join(head, name)


def main_thread_clause(sample: Sample) -> tuple[str | None, PathState | None]:
    """Where the training loop waits, from MainThreadSource, and the watched path it hits."""
    mt = sample.process.main_thread if sample.process is not None else None
    if not mt:
        return None, None
    where = ""
    if mt.get("file") and mt.get("function"):
        where = f" in {os.path.basename(mt['file'])}:{mt['function']}"
    fd_path = mt.get("fd_path")
    syscall = mt.get("syscall")
    if fd_path and str(fd_path).startswith("/"):
        owner = _owner(fd_path, sample)
        fstype = _fstype_of(fd_path, owner)
        target = _short(fd_path)
        if syscall in READ_CALLS:
            action = f"reading {target}"
        elif syscall == "close":
            action = f"closing {target}"
        elif syscall in _FLUSHES:
            action = f"waiting for {syscall}() of {target}"
        else:
            action = f"writing {target}"
        kind = f" ({fstype})" if fstype else ""
        return f"the training loop is blocked{where} {action}{kind}", owner
    if mt.get("state") == "D":
        wchan = f" ({mt['wchan']})" if mt.get("wchan") else ""
        return f"the training loop is blocked in the kernel{wchan}{where}", None
    return None, None


def process_clause(mt: dict | None, sample: Sample) -> tuple[str | None, PathState | None]:
    """Where another process's main thread is blocked (core.processes.threadwait.task_wait: no
    frame,
    the system call and its file), and the watched path it hits."""
    if not mt or not mt.get("blocked"):
        return None, None
    fd_path, syscall = mt.get("fd_path"), mt.get("syscall")
    if fd_path and str(fd_path).startswith("/") and syscall:
        owner = _owner(fd_path, sample)
        fstype = _fstype_of(fd_path, owner)
        kind = f" ({fstype})" if fstype else ""
        return f"its main thread is blocked in {syscall}() of {_short(fd_path)}{kind}", owner
    if mt.get("state") == "D":
        wchan = f" ({mt['wchan']})" if mt.get("wchan") else ""
        return f"its main thread is blocked in the kernel{wchan}", None
    return None, None


def holder_of(gpu: GpuState, sample: Sample) -> TrainingProcess | None:
    """The training process found on the machine that holds the most memory on ``gpu``."""
    on = [
        p
        for p in sample.processes
        if p.gpu_mem_bytes and p.gpus is not None and gpu.index in p.gpus
    ]
    return max(on, key=lambda p: (p.gpu_mem_bytes or 0, -p.pid), default=None)


def _named(p: TrainingProcess) -> str:
    return f"pid {p.pid} (`{p.command}`)"


def _rank(p: PathState, ctx: Context) -> int:
    if not p.responsive:
        return 0
    if is_slow(p, ctx.baseline, ctx.defaults):
        return 1
    if p.shared:
        return 2
    return 3


def _disk_window(history: History, device: str, since: float) -> tuple[float | None, float | None]:
    """Mean %util and mean await (the worse of read and write) of ``device`` since ``since``."""
    _, util = history.series("disk", device, "util", since=since)
    _, r_await = history.series("disk", device, "r_await", since=since)
    _, w_await = history.series("disk", device, "w_await", since=since)
    awaits = [max(r, w) for r, w in zip(r_await, w_await, strict=False)]
    return _mean(util), _mean(awaits)


def storage_evidence(ctx: Context, since: float, holder: TrainingProcess | None = None) -> Evidence:
    sample, d = ctx.sample, ctx.defaults
    if holder is not None:
        blocked, blocked_path = process_clause(holder.main_thread, sample)
    else:
        blocked, blocked_path = main_thread_clause(sample)
    parts: list[str] = []

    proc = sample.process
    if holder is not None and holder.io is not None:  # its rates now: no history of its own
        parts.append(
            f"it now writes {fmt_rate(holder.io.write_chars_s)} and reads "
            f"{fmt_rate(holder.io.read_chars_s)}"
        )
    elif proc is not None:
        name = str(proc.pid)
        _, writes = ctx.history.series("proc", name, "write_chars_s", since=since)
        _, reads = ctx.history.series("proc", name, "read_chars_s", since=since)
        if writes or reads:
            parts.append(
                f"the process wrote {fmt_rate(_mean(writes) or 0.0)} and read "
                f"{fmt_rate(_mean(reads) or 0.0)}"
            )

    culprit = blocked_path
    if culprit is None and sample.paths:
        culprit = min(sample.paths.values(), key=lambda p: (_rank(p, ctx), p.path))
    if culprit is not None:
        facts = [culprit.fstype or culprit.kind]
        if not culprit.responsive:
            facts.append(f"not answering within {fmt_duration(d.mount_timeout_s)}")
        elif culprit.probe is not None and culprit.probe.p50_ms is not None:
            facts.append(f"write+fsync p50 {fmt_ms(culprit.probe.p50_ms)}")
        parts.append(f"{culprit.path} is on {', '.join(facts)}")

    # the devices under the watched paths; with no path at all, every disk
    devices = set(path_devices(sample) if sample.paths else watched_devices(sample))
    disk_busy = False
    busiest: tuple[float, str, float | None] | None = None
    for dev in sorted(devices):
        util, wait = _disk_window(ctx.history, dev, since)
        if util is None:
            continue
        if util >= d.disk_busy_util_pct or (wait is not None and wait >= d.saturated_await_ms):
            disk_busy = True
        if busiest is None or util > busiest[0]:
            busiest = (util, dev, wait)
    if busiest is not None:
        util, dev, wait = busiest
        await_text = f", {fmt_ms(wait)} await" if wait is not None else ""
        parts.append(f"disk {dev} was {_pct(util)} busy{await_text}")

    # a share that answers fast is no evidence; not answering, a slow probe or a blocked
    # loop is
    suspicious = culprit is not None and _rank(culprit, ctx) < 2
    healthy = not (suspicious or disk_busy or blocked)
    clause = "; ".join(parts) if parts else "no storage activity was measured"
    return Evidence(clause, culprit, blocked, healthy, disk_busy)


def _storage_fix(ev: Evidence) -> str:
    p = ev.culprit
    if p is not None and not p.responsive:
        return (
            f"{p.path} ({p.fstype or p.kind}) is not answering: check the server behind "
            f"{p.source or p.mountpoint or p.path}. Then write logs and checkpoints to local "
            "disk (e.g. /tmp/runs) and copy them to the share in the background, so a stalled "
            "share can no longer stop training."
        )
    if p is not None and (p.shared or p.kind == "shared"):
        return LOCAL_FIX
    return (
        "Move logs and checkpoints off the busy disk (or write them less often: TensorBoard "
        "flush_secs, Lightning log_every_n_steps), and keep the training data on a different, "
        "local disk."
    )
