"""GPU rules: explain an idle GPU in one sentence that links it to storage.

``gpu-unavailable``: no NVIDIA driver/GPU (info). ``gpu-stalled`` lives in advice.gpu_stall,
the storage evidence both rules quote in advice.gpu_evidence. ``gpu-starved``: utilization is
low and erratic over ``gpu_starved_window_s`` while the disk under a watched path is busy or
the process's reads sit at a ceiling - the input pipeline cannot keep up.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from ..core.model import Alert
from .context import Context, Detector
from .gpu_evidence import (
    Evidence,
    _named,
    _pct,
    holder_of,
    process_clause,
    storage_evidence,
)
from .gpu_stall import gpu_stalled
from .text import fmt_duration


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
