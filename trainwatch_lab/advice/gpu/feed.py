"""Is the input pipeline held up by storage or by the CPU? The evidence gpu-starved needs.

Why: ``%util`` says little about SSDs (they serve many requests at once), writes count as
"busy" too, and a steady ``read_chars`` fits a CPU-bound decode reading from the page cache
just as well. Storage starves the GPU only when all three hold over the window: the block-layer
reads of the watched process tree are most of its data device's reads (the device serves
*our* reads, not somebody else's or our checkpoint writes), those reads wait long (read
await), and the loaders - the DataLoader workers, or the main thread when there are none -
sleep on files much of the time (core.processes.waits catches them in a read system call: D state on
the device). Workers that hardly wait on files while the loop waits on them are CPU-bound:
more workers help there, faster storage does not.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

from ...core.defaults import MIB, Defaults  # MIB: the history keeps rmb_s in MiB/s
from ...core.model import ProcessIO, Sample, TrainingProcess, path_devices, watched_devices
from ..context import Context
from ..io_bound import call_shares
from ..text import fmt_ms, fmt_pct, fmt_rate
from .evidence import READ_CALLS

COVERED = 0.8  # the share of a window a series must span to judge the window by it
_HOLDERS = "gpu_feed.holders"  # ctx.state: pid -> (t, loaders, read share) per tick


@dataclass(slots=True)
class Feed:
    """What fed the GPU over the window; ``None`` where it was not measured."""

    device: str | None = None  # the watched device that served the most reads
    device_read_bps: float | None = None
    tree_share: float | None = None  # the tree's block reads / the device's reads (0-1)
    read_await_ms: float | None = None
    loaders: str = "the main thread"  # or "its DataLoader workers"
    file_wait: float | None = None  # share of the time the loaders slept on files
    loop_on_workers: float | None = None  # the main thread asleep on no file (their queue)
    loop_busy: float | None = None  # the main thread on a CPU (neither asleep nor waiting)

    def storage_bound(self, d: Defaults) -> bool:
        """All three: our reads, slow reads, loaders asleep on them."""
        return (
            (self.tree_share or 0.0) >= d.gpu_starved_read_share
            and (self.read_await_ms or 0.0) >= d.gpu_starved_read_await_ms
            and (self.file_wait or 0.0) >= d.gpu_starved_wait_share
        )

    def cpu_bound(self, d: Defaults) -> bool:
        """The loaders compute instead of waiting: workers the loop waits on while they
        hardly sleep on files, or no workers and a main thread that is on a CPU."""
        if self.file_wait is None or self.file_wait >= d.gpu_input_file_wait_max:
            return False
        if self.loaders != "the main thread":
            return (self.loop_on_workers or 0.0) >= d.gpu_input_loop_waits
        return (self.loop_busy or 0.0) >= d.gpu_input_loop_busy

    def clause(self) -> str:
        """The measured numbers, for the message."""
        parts = []
        if self.device is not None and self.tree_share is not None:
            wait = f", {fmt_ms(self.read_await_ms)} read await" if self.read_await_ms else ""
            parts.append(
                f"its block reads were {fmt_pct(self.tree_share)} of {self.device}'s "
                f"{fmt_rate(self.device_read_bps or 0.0)}{wait}"
            )
        if self.file_wait is not None:
            parts.append(
                f"{self.loaders} slept on file reads {fmt_pct(self.file_wait)} of the time"
            )
        return " and ".join(parts)


def _mean(ctx: Context, kind: str, name: str, field: str, since: float) -> float | None:
    _, values = ctx.history.series(kind, name, field, since=since)
    return statistics.fmean(values) if values else None


def _device(ctx: Context, since: float, tree_bps: float | None, feed: Feed) -> None:
    """The watched device with the most reads, its read await and our share of its reads."""
    sample, d = ctx.sample, ctx.defaults
    devices = path_devices(sample) if sample.paths else watched_devices(sample)
    best: tuple[float, str] | None = None
    for dev in devices:
        mib = _mean(ctx, "disk", dev, "rmb_s", since)
        if mib is not None and (best is None or mib > best[0]):
            best = (mib, dev)
    if best is None or best[0] * MIB < d.gpu_starved_min_read_bps:
        return
    feed.device, feed.device_read_bps = best[1], best[0] * MIB
    feed.read_await_ms = _mean(ctx, "disk", best[1], "r_await", since)
    if tree_bps is not None:
        feed.tree_share = min(1.0, tree_bps / feed.device_read_bps)


def _reads(ctx: Context, since: float, side: str) -> float | None:
    """The share of the time ``side`` ("main" or "workers") slept in a read of a file under
    a watched path (io_bound.call_shares of the read calls). Writes, fsync and the rest are
    no read: a loop that flushes logs is not starved of data."""
    paths = sorted({p for _, p, _ in ctx.history.keys("wait") if p in ctx.sample.paths})
    measured = [s for p in paths if (s := call_shares(ctx.history, p, side, since)) is not None]
    if not measured:
        return None
    return sum(share for s in measured for call, share in s.items() if call in READ_CALLS)


def _waits(ctx: Context, since: float, pid: str, feed: Feed) -> None:
    """Who loads the data and how much of the time it slept on file reads (core.processes.waits)."""
    paths = sorted(ctx.sample.paths)

    def total(side: str) -> float | None:
        means = [m for p in paths if (m := _mean(ctx, "wait", p, side, since)) is not None]
        return sum(means) if means else None

    main = total("main")  # asleep on any file under a watched path, reads or not
    elsewhere = _mean(ctx, "proc", pid, "wait_elsewhere", since)
    feed.loop_on_workers = _mean(ctx, "proc", pid, "wait_other", since)
    if main is not None or elsewhere is not None:
        asleep = (main or 0.0) + (elsewhere or 0.0) + (feed.loop_on_workers or 0.0)
        feed.loop_busy = max(0.0, 1.0 - asleep)
    workers = _reads(ctx, since, "workers")
    if workers is not None:
        feed.loaders, feed.file_wait = "its DataLoader workers", workers
    else:  # files under no watched path: not split by call, so no read it can count
        feed.file_wait = _reads(ctx, since, "main")


def _tick_reads(io: ProcessIO | None) -> tuple[str, float] | None:
    """(loaders, share of the last interval they slept on file reads) of a training process
    found, as monitor.TrainingWaits measured it; None where it measured nothing."""
    if io is None:
        return None
    if io.worker_waits:
        loaders, calls = "its DataLoader workers", io.worker_wait_calls
    elif io.waits_elsewhere is not None:  # set on every measured tick
        loaders, calls = "the main thread", io.wait_calls
    else:
        return None
    reads = sum(f for by_call in calls.values() for c, f in by_call.items() if c in READ_CALLS)
    return loaders, reads


def note_holders(ctx: Context) -> None:
    """Keep, tick by tick over ``gpu_starved_window_s``, the read waits of each training
    process found on the machine: it has no history of its own, and one tick is no window.
    gpu-starved calls it every tick (in ``ctx.state``)."""
    tracks: dict[int, deque[tuple[float, str, float]]] = ctx.state.setdefault(_HOLDERS, {})
    sample = ctx.sample
    for row in sample.processes:
        if (reads := _tick_reads(row.io)) is not None:
            tracks.setdefault(row.pid, deque()).append((sample.t, *reads))
    listed = {row.pid for row in sample.processes}
    for pid in list(tracks):
        track = tracks[pid]
        while track and track[0][0] < sample.t - ctx.defaults.gpu_starved_window_s:
            track.popleft()
        if pid not in listed or not track:
            del tracks[pid]


def _holder_reads(ctx: Context, since: float, holder: TrainingProcess, feed: Feed) -> None:
    """The loaders of ``holder`` and their read waits over ``[since, now]`` (note_holders),
    if measured over most of it (COVERED); else no verdict: one look is no share of time."""
    track = ctx.state.get(_HOLDERS, {}).get(holder.pid)
    if not track:
        return
    loaders = track[-1][1]
    kept = [(t, reads) for t, who, reads in track if t >= since and who == loaders]
    if len(kept) < 2 or kept[-1][0] - kept[0][0] < COVERED * (ctx.sample.t - since):
        return
    feed.loaders = loaders
    feed.file_wait = statistics.fmean(reads for _, reads in kept)


def feed_evidence(ctx: Context, since: float, holder: TrainingProcess | None = None) -> Feed:
    """The feed of the watched process over ``[since, now]``, or of ``holder``, a training
    process found on the machine: its block reads now (no history of its own) and its read
    waits as note_holders kept them."""
    feed = Feed()
    sample: Sample = ctx.sample
    if holder is not None:
        io = holder.io
        _device(ctx, since, io.read_bytes_s if io is not None else None, feed)
        _holder_reads(ctx, since, holder, feed)
        return feed
    if sample.process is None:
        return feed
    pid = str(sample.process.pid)
    _device(ctx, since, _mean(ctx, "proc", pid, "read_bytes_s", since), feed)
    _waits(ctx, since, pid, feed)
    return feed
