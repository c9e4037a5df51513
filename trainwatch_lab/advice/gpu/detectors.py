"""GPU rules: explain an idle GPU in one sentence that links it to storage.

``gpu-unavailable``: no NVIDIA driver/GPU (info). ``gpu-stalled`` lives in advice.gpu.stall,
the storage evidence both rules quote in advice.gpu.evidence. ``gpu-starved``: utilization is
low and erratic over ``gpu_starved_window_s`` and storage is the limit (advice.gpu.feed: the
tree's block reads dominate the data device, read await is high, the loaders sleep on file
reads). ``input-cpu-bound`` (info): the same GPU pattern with loaders that compute instead of
waiting on files - more workers help, faster storage does not.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from ...core.model import Alert, GpuState, TrainingProcess
from ..context import Context, Detector
from ..text import fmt_duration, fmt_pct
from .evidence import (
    Evidence,
    _named,
    _pct,
    holder_of,
    process_clause,
    storage_evidence,
)
from .feed import COVERED, feed_evidence, note_holders
from .stall import gpu_stalled


def gpu_unavailable(ctx: Context) -> Iterator[Alert]:
    """No GPU rows: no driver or GPU, or (``notes["gpu_selection"]``) GPUs that the
    selection matched none of - the fix differs."""
    note = ctx.sample.notes.get("gpus")
    if not note or ctx.sample.gpus:
        return
    if ctx.sample.notes.get("gpu_selection"):
        fix = (
            "Check --gpu / c.TrainWatch.gpu against `nvidia-smi -L`: it takes indices and "
            "GPU-… or MIG-… UUIDs (a prefix is enough), of GPUs this machine has."
        )
    else:
        fix = (
            "Nothing to do on a CPU-only machine. If this machine has an NVIDIA GPU, check that "
            "`nvidia-smi` works here and that the nvidia-ml-py package is installed."
        )
    yield Alert(
        code="gpu-unavailable",
        severity="info",
        subject="gpu",
        message=f"No GPU metrics: {note}. Storage monitoring works as usual.",
        fix=fix,
    )


def _starved_gpus(ctx: Context) -> Iterator[tuple[GpuState, TrainingProcess | None, float, float]]:
    """GPUs our work holds whose utilization was low and erratic over the whole window:
    (gpu, the training process found holding it, mean, stdev)."""
    d, sample = ctx.defaults, ctx.sample
    window = d.gpu_starved_window_s
    for gpu in sample.gpus:
        holder = holder_of(gpu, sample)
        if gpu.lost or gpu.util_pct is None or (gpu.process_mem_bytes == 0 and not holder):
            continue
        ts, util = ctx.history.series("gpu", str(gpu.index), "util_pct", since=sample.t - window)
        if len(util) < 5 or ts[-1] - ts[0] < COVERED * window:
            continue  # not a window's worth of data yet
        mean, stdev = statistics.fmean(util), statistics.pstdev(util)
        if mean < d.gpu_starved_mean_util_pct and stdev >= d.gpu_starved_stdev_pct:
            yield gpu, holder, mean, stdev


def _swing(gpu: GpuState, mean: float, stdev: float, window: float) -> str:
    return (
        f"GPU {gpu.index} averaged {_pct(mean)} (swinging ±{_pct(stdev)}) over the last "
        f"{fmt_duration(window)}"
    )


def gpu_starved(ctx: Context) -> Iterator[Alert]:
    """Storage starves the GPU: our block reads dominate the data device, they wait long,
    and the loaders sleep on them (advice.gpu.feed)."""
    d, sample = ctx.defaults, ctx.sample
    window = d.gpu_starved_window_s
    note_holders(ctx)  # every tick: a found process's waits have no history of their own
    for gpu, holder, mean, stdev in _starved_gpus(ctx):
        feed = feed_evidence(ctx, sample.t - window, holder)
        if not feed.storage_bound(d):
            continue
        ev = storage_evidence(ctx, sample.t - window, holder=holder)
        user = f" while {_named(holder)} trained on it" if holder is not None else ""
        yield Alert(
            code="gpu-starved",
            severity="warning",
            subject=f"GPU {gpu.index}",
            message=(
                f"{_swing(gpu, mean, stdev, window)}{user}; in that time {ev.clause}; "
                f"{feed.clause()} — the data disk cannot feed the GPU."
            ),
            fix=(
                "Feed the GPU from faster storage: copy the dataset to local NVMe (or RAM) "
                "before training, read it in larger shards (WebDataset, TFRecord, Arrow), and "
                "use DataLoader(num_workers=4 or more, pin_memory=True, prefetch_factor=4, "
                "persistent_workers=True); keep logs and checkpoints off the data disk."
            ),
        )


def input_cpu_bound(ctx: Context) -> Iterator[Alert]:
    """The GPU waits on an input pipeline that computes (decoding, augmenting) rather than
    reads: more workers help, faster storage does not."""
    d, sample = ctx.defaults, ctx.sample
    window = d.gpu_starved_window_s
    for gpu, holder, mean, stdev in _starved_gpus(ctx):
        if holder is not None:
            continue  # no history of its own: no way to tell CPU from storage
        feed = feed_evidence(ctx, sample.t - window)
        if feed.storage_bound(d) or not feed.cpu_bound(d):
            continue
        if feed.loaders == "the main thread":
            why = f"the training loop was on a CPU {fmt_pct(feed.loop_busy)} of the time"
            fix = (
                "Decode and augment in DataLoader worker processes instead of the training "
                "loop: DataLoader(num_workers=4 or more, persistent_workers=True, "
                "prefetch_factor=4), or move the decoding to the GPU (DALI, torchvision.io "
                "decode_jpeg on the device)."
            )
        else:
            waited = fmt_pct(feed.loop_on_workers)
            why = f"the training loop waited on its workers {waited} of the time"
            fix = (
                "Give the DataLoader more workers (num_workers up to the free CPU cores), make "
                "each sample cheaper to decode (smaller images, pre-resized or pre-tokenized "
                "data), or decode on the GPU (DALI); faster storage would not help."
            )
        yield Alert(
            code="input-cpu-bound",
            severity="info",
            subject=f"GPU {gpu.index}",
            message=(
                f"{_swing(gpu, mean, stdev, window)}; {why} while {feed.loaders} slept on "
                f"file reads only {fmt_pct(feed.file_wait)} of the time — the input pipeline "
                "is CPU-bound, not storage-bound."
            ),
            fix=fix,
        )


GPU_DETECTORS: list[Detector] = [gpu_unavailable, gpu_stalled, gpu_starved, input_cpu_bound]

__all__ = [
    "GPU_DETECTORS",
    "Evidence",
    "gpu_stalled",
    "gpu_starved",
    "gpu_unavailable",
    "holder_of",
    "input_cpu_bound",
    "process_clause",
]
