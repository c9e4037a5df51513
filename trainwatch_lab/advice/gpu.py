"""GPU rules: explain an idle GPU in one sentence that links it to storage.

``gpu-stalled``: the watched process tree holds GPU memory but utilization has stayed under
``gpu_idle_util_pct`` for ``gpu_stalled_for_s`` - the training loop is waiting on something.
``gpu-starved``: utilization is low and erratic over ``gpu_starved_window_s`` while the disk
under a watched path is busy or the process's reads sit at a ceiling - the input pipeline
cannot keep up. Both messages carry the storage evidence of the same window (device %util and
await, the process's I/O rates, the mount kind and probe latency of the most suspicious watched
path, and where the main thread is blocked when the sampler runs inside the training process),
or say that storage looks healthy, so the user knows where to look. A training process found on
the machine (``sample.processes``: a script in a terminal, tmux or nohup) that holds memory on
the GPU is named, with where its main thread is blocked (procfs: syscall and file).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass

from ..core.defaults import Defaults
from ..core.history import History
from ..core.model import Alert, GpuState, PathState, Sample, TrainingProcess
from .advisor import Context, Detector
from .storage import LOCAL_FIX, is_slow
from .text import fmt_bytes, fmt_duration, fmt_ms, fmt_rate

_WRITES = {"write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate"}
_FLUSHES = {"fsync", "fdatasync", "sync_file_range", "syncfs", "close"}
_READS = {"read", "pread64", "readv", "preadv", "preadv2"}


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
    reads_pinned: bool


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
        from ..core.mounts import mount_for_path, read_mounts

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
        if syscall in _READS:
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
    """Where another process's main thread is blocked (core.threadwait.task_wait: no frame,
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


def _pinned(values: list[float], d: Defaults) -> bool:
    """Reads stuck at a ceiling: a steady, non-trivial rate (the storage's limit)."""
    if len(values) < 3:
        return False
    mean = statistics.fmean(values)
    return mean >= d.gpu_starved_min_read_bps and statistics.pstdev(values) / mean < (
        d.gpu_starved_read_cv
    )


def storage_evidence(ctx: Context, since: float, holder: TrainingProcess | None = None) -> Evidence:
    sample, d = ctx.sample, ctx.defaults
    if holder is not None:
        blocked, blocked_path = process_clause(holder.main_thread, sample)
    else:
        blocked, blocked_path = main_thread_clause(sample)
    parts: list[str] = []

    proc = sample.process
    reads: list[float] = []
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
    reads_pinned = _pinned(reads, d)

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

    devices = {p.device for p in sample.paths.values() if p.device}
    if not sample.paths:
        devices = set(sample.disks)
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

    suspicious = culprit is not None and _rank(culprit, ctx) < 3
    healthy = not (suspicious or disk_busy or blocked)
    clause = "; ".join(parts) if parts else "no storage activity was measured"
    return Evidence(clause, culprit, blocked, healthy, disk_busy, reads_pinned)


# -- detectors -------------------------------------------------------------------------------
def gpu_unavailable(ctx: Context) -> Iterator[Alert]:
    note = ctx.sample.notes.get("gpus")
    if not note or ctx.sample.gpus:
        return
    yield Alert(
        code="gpu-unavailable",
        severity="info",
        subject="gpu",
        message=f"No GPU metrics: {note}. Storage monitoring works as usual.",
        fix=(
            "Nothing to do on a CPU-only machine. If this machine has an NVIDIA GPU, check that "
            "`nvidia-smi` works here and that the nvidia-ml-py package is installed."
        ),
    )


def _idle_since(history: History, gpu: GpuState, d: Defaults, now: float) -> float | None:
    """Start of the current unbroken run of samples under the idle threshold."""
    ts, util = history.series(
        "gpu", str(gpu.index), "util_pct", since=now - 2 * d.gpu_stalled_for_s
    )
    start = None
    for t, u in zip(reversed(ts), reversed(util), strict=True):
        if u >= d.gpu_idle_util_pct:
            break
        start = t
    return start


def _who(sample: Sample) -> str:
    if sample.process is None:
        return "the watched process"
    return f"the training process (pid {sample.process.pid})"


def _script_stalled(gpu: GpuState, p: TrainingProcess, ctx: Context, since: float) -> Alert:
    """gpu-stalled for a training process found on the machine, named with its command."""
    sample = ctx.sample
    ev = storage_evidence(ctx, since, holder=p)
    _, util = ctx.history.series("gpu", str(gpu.index), "util_pct", since=since - 1e-6)
    top = max(util) if util else gpu.util_pct or 0.0
    head = (
        f"{_named(p)} holds {fmt_bytes(p.gpu_mem_bytes)} on GPU {gpu.index} at {_pct(top)} "
        f"for {fmt_duration(sample.t - since)}"
    )
    if ev.healthy:
        message = (
            f"{head}; in that time {ev.clause} — storage looks healthy, so it is waiting on "
            "something else."
        )
        fix = (
            f"Find what the training loop waits on: `py-spy dump --pid {p.pid}` shows it; "
            "common causes are a DataLoader with too few workers, a CPU-bound step, a "
            "distributed barrier or a deadlock."
        )
    else:
        tail = ev.blocked or "it is probably waiting on storage"
        message = f"{head}; {tail}; in that time {ev.clause}."
        fix = _storage_fix(ev)
    return Alert("gpu-stalled", "warning", f"GPU {gpu.index}", message, fix)


def gpu_stalled(ctx: Context) -> Iterator[Alert]:
    d, sample = ctx.defaults, ctx.sample
    for gpu in sample.gpus:
        holder = holder_of(gpu, sample)
        if gpu.lost or gpu.util_pct is None or not (gpu.process_mem_bytes or holder):
            continue
        if gpu.util_pct >= d.gpu_idle_util_pct:
            continue
        since = _idle_since(ctx.history, gpu, d, sample.t)
        if since is None or sample.t - since < d.gpu_stalled_for_s:
            continue
        if holder is not None:
            yield _script_stalled(gpu, holder, ctx, since)
            continue
        ev = storage_evidence(ctx, since)
        _, util = ctx.history.series("gpu", str(gpu.index), "util_pct", since=since - 1e-6)
        top = max(util) if util else gpu.util_pct
        head = (
            f"GPU {gpu.index} has been at {_pct(top)} for {fmt_duration(sample.t - since)} "
            f"while {_who(sample)} holds {fmt_bytes(gpu.process_mem_bytes)}"
        )
        if ev.healthy:
            message = (
                f"{head}; in that time {ev.clause} — storage looks healthy, so the loop is "
                "waiting on something else."
            )
            pid = sample.process.pid if sample.process is not None else "<pid>"
            fix = (
                f"Find what the training loop waits on: `py-spy dump --pid {pid}` (or "
                "torch.profiler) shows it; common causes are a DataLoader with too few workers, "
                "a CPU-bound step, a distributed barrier or a deadlock."
            )
        else:
            tail = ev.blocked or (
                "the training loop is probably waiting on storage"
                if ev.culprit is None or ev.culprit.shared or not ev.culprit.responsive
                else "the training loop is probably waiting on the disk"
            )
            message = f"{head}; in that time {ev.clause} — {tail}."
            fix = _storage_fix(ev)
        yield Alert(
            code="gpu-stalled",
            severity="warning",
            subject=f"GPU {gpu.index}",
            message=message,
            fix=fix,
        )


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


def gpu_starved(ctx: Context) -> Iterator[Alert]:
    d, sample = ctx.defaults, ctx.sample
    window = d.gpu_starved_window_s
    for gpu in sample.gpus:
        holder = holder_of(gpu, sample)
        if gpu.lost or gpu.util_pct is None or (gpu.process_mem_bytes == 0 and not holder):
            continue
        ts, util = ctx.history.series("gpu", str(gpu.index), "util_pct", since=sample.t - window)
        if len(util) < 5 or ts[-1] - ts[0] < 0.8 * window:
            continue  # not a window's worth of data yet
        mean, stdev = statistics.fmean(util), statistics.pstdev(util)
        if mean >= d.gpu_starved_mean_util_pct or stdev < d.gpu_starved_stdev_pct:
            continue
        ev = storage_evidence(ctx, sample.t - window, holder=holder)
        if not (ev.disk_busy or ev.reads_pinned):
            continue
        cause = (
            "the process's reads sit at a ceiling"
            if ev.reads_pinned and not ev.disk_busy
            else "the data disk is busy"
        )
        user = f" while {_named(holder)} trained on it" if holder is not None else ""
        yield Alert(
            code="gpu-starved",
            severity="warning",
            subject=f"GPU {gpu.index}",
            message=(
                f"GPU {gpu.index} averaged {_pct(mean)} (swinging ±{_pct(stdev)}) over the last "
                f"{fmt_duration(window)}{user}; in that time {ev.clause} — {cause}: the input "
                "pipeline cannot feed the GPU."
            ),
            fix=(
                "Feed the GPU from faster storage: copy the dataset to local NVMe (or RAM) "
                "before training, read it in larger shards (WebDataset, TFRecord, Arrow), and "
                "use DataLoader(num_workers=4 or more, pin_memory=True, prefetch_factor=4, "
                "persistent_workers=True); keep logs and checkpoints off the data disk."
            ),
        )


GPU_DETECTORS: list[Detector] = [gpu_unavailable, gpu_stalled, gpu_starved]

__all__ = [
    "GPU_DETECTORS",
    "Evidence",
    "gpu_stalled",
    "gpu_starved",
    "gpu_unavailable",
    "holder_of",
    "process_clause",
]
