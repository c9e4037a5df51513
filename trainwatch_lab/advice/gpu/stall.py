"""``gpu-stalled``: a busy process holds GPU memory while utilization stays near 0.

Why it is this careful: PyTorch keeps memory cached, so memory held at 0 % is normal while a
user reads results; the rule must never nag. It fires only while the process that holds the
memory is busy - a notebook kernel running a cell (its main thread outside the event loop, or
the server's ``execution_state == "busy"``), a training script not waiting at its terminal -
for ``gpu_stalled_for_s``, after real GPU work (``gpu_work_util_pct``) within
``gpu_stalled_work_within_s`` of the busy stretch's start. The stall is measured whole (state
kept across ticks, not a bounded look back), the process is named, and storage is blamed only
with evidence (advice.gpu.evidence).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ...core.model import Alert, GpuState, Sample, TrainingProcess
from ..context import Context
from ..text import fmt_bytes, fmt_duration
from .evidence import _named, _pct, _storage_fix, holder_of, storage_evidence

_STATE = "gpu-stalled"
_TTY = ("/dev/pts/", "/dev/tty", "/dev/console")


@dataclass
class _Track:
    """Per GPU, across ticks: the current idle run, the last real work, who is busy since when."""

    idle_since: float | None = None
    work_at: float | None = None
    low: float = 100.0  # highest utilization of the current idle run
    busy_since: dict[str, float] = field(default_factory=dict)


@dataclass
class _Actor:
    """The process that holds the memory: who it is and whether it is working now."""

    key: str
    label: str
    pid: int | None
    mem: int | None
    busy: bool
    holder: TrainingProcess | None = None


def script_busy(mt: dict | None) -> bool:
    """A training script counts as busy unless its main thread waits for keyboard input."""
    fd_path = str((mt or {}).get("fd_path") or "")
    return not fd_path.startswith(_TTY)


def self_busy(mt: dict | None) -> bool:
    """The watched process (a kernel watching itself) is busy unless its main thread waits
    in the event loop; without main-thread data (another pid) it counts as busy."""
    return not (mt and mt.get("idle_loop"))


def _actor(gpu: GpuState, sample: Sample) -> _Actor | None:
    holder = holder_of(gpu, sample)
    if holder is not None:
        busy = script_busy(holder.main_thread)
        return _Actor(
            f"pid:{holder.pid}", _named(holder), holder.pid, holder.gpu_mem_bytes, busy, holder
        )
    if not gpu.process_mem_bytes:
        return None
    holding = [k for k in sample.kernels.values() if k.get("gpu_mem_bytes")]
    if sample.kernels:  # the server: the watched tree is all of it; only a kernel counts
        if not holding:
            return None
        k = max(holding, key=lambda k: (k.get("execution_state") == "busy", k["gpu_mem_bytes"]))
        name = k.get("name") or "kernel"
        label = f"the {name} kernel (pid {k.get('pid')}) running a cell"
        busy = k.get("execution_state") == "busy"
        return _Actor(f"kernel:{k.get('id')}", label, k.get("pid"), k["gpu_mem_bytes"], busy)
    proc = sample.process
    if proc is None:
        return _Actor("self", "the watched process", None, gpu.process_mem_bytes, True)
    busy = self_busy(proc.main_thread)
    label = f"the training process (pid {proc.pid})"
    return _Actor(f"pid:{proc.pid}", label, proc.pid, gpu.process_mem_bytes, busy)


def _update(track: _Track, util: float, t: float, ctx: Context) -> None:
    d = ctx.defaults
    if util >= d.gpu_idle_util_pct:
        track.idle_since = None
        if util >= d.gpu_work_util_pct:
            track.work_at = t
        return
    if track.idle_since is None:
        track.idle_since, track.low = t, util
    track.low = max(track.low, util)


def gpu_stalled(ctx: Context) -> Iterator[Alert]:
    d, sample = ctx.defaults, ctx.sample
    tracks: dict[str, _Track] = ctx.state.setdefault(_STATE, {})
    for gpu in sample.gpus:
        if gpu.lost or gpu.util_pct is None:
            tracks.pop(gpu.uuid, None)
            continue
        track = tracks.setdefault(gpu.uuid, _Track())
        _update(track, gpu.util_pct, sample.t, ctx)
        actor = _actor(gpu, sample)
        if actor is None or not actor.busy:
            track.busy_since.clear()
            continue
        busy_since = track.busy_since.setdefault(actor.key, sample.t)
        for key in [k for k in track.busy_since if k != actor.key]:
            del track.busy_since[key]
        if track.idle_since is None or track.work_at is None:
            continue
        if track.work_at < busy_since - d.gpu_stalled_work_within_s:
            continue  # no GPU work since long before this busy stretch: not a stall
        since = max(track.idle_since, busy_since)
        if sample.t - since < d.gpu_stalled_for_s:
            continue
        yield _alert(gpu, actor, ctx, since, track.low)


def _alert(gpu: GpuState, actor: _Actor, ctx: Context, since: float, top: float) -> Alert:
    sample = ctx.sample
    ev = storage_evidence(ctx, since, holder=actor.holder)
    # who first (issue 14: "pid 4242 (`python train.py`) holds 21 GiB on GPU 0 at 0 % for
    # 35 s; its main thread is blocked in fsync() of ..."), then the evidence
    head = (
        f"{actor.label} holds {fmt_bytes(actor.mem)} on GPU {gpu.index} at {_pct(top)} for "
        f"{fmt_duration(sample.t - since)}"
    )
    if head.startswith("the "):  # "The python3 kernel (pid 88) running a cell holds ..."
        head = "T" + head[1:]
    pid = actor.pid if actor.pid is not None else "<pid>"
    if ev.healthy:
        message = (
            f"{head}; in that time {ev.clause} — storage looks healthy, so the loop is "
            "waiting on something else."
        )
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
    return Alert("gpu-stalled", "warning", f"GPU {gpu.index}", message, fix)
