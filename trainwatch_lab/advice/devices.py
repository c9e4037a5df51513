"""Device rules: a block device under a watched path that cannot keep up (diskstats).

storage.py lists these among the storage rules (STORAGE_DETECTORS), in the place
``disk_saturated`` always had. Like every rule: at most one warning per (code, subject),
measured numbers in the message, thresholds only from ``ctx.defaults``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core.defaults import Defaults
from ..core.history import History
from ..core.model import Alert, Sample
from .context import Context, Detector
from .text import fmt_duration, fmt_mbs


def _is_saturated(util: float, r_await: float, w_await: float, d: Defaults) -> bool:
    return util >= d.saturated_util_pct and max(r_await, w_await) >= d.saturated_await_ms


def _saturated_since(history: History, device: str, d: Defaults, now: float) -> float | None:
    """Start of the current unbroken run of saturated intervals of ``device``, if any.

    A sample's rates describe the interval that ends at its time, so the run starts at the
    last sample that was not saturated (or at the oldest one we have).
    """
    span = 2 * d.saturated_for_s + 60
    times, util = history.window("disk", device, "util", span, now=now)
    _, r_await = history.window("disk", device, "r_await", span, now=now)
    _, w_await = history.window("disk", device, "w_await", span, now=now)
    if not times or len(r_await) != len(times) or len(w_await) != len(times):
        return None
    start: float | None = None
    for i in range(len(times) - 1, -1, -1):
        if not _is_saturated(util[i], r_await[i], w_await[i], d):
            return start if start is None else times[i]
        start = times[i]
    return start


def _paths_by_device(sample: Sample) -> dict[str, list[str]]:
    """The watched paths under each block device, sorted (one warning names them all)."""
    devices: dict[str, list[str]] = {}
    for path, p in sorted(sample.paths.items()):
        if p.device:
            devices.setdefault(p.device, []).append(path)
    return devices


def disk_saturated(ctx: Context) -> Iterator[Alert]:
    """A device under a watched path has been saturated (busy and slow to answer) for
    ``saturated_for_s``: training waits on it."""
    d = ctx.defaults
    for device, paths in sorted(_paths_by_device(ctx.sample).items()):
        rates = ctx.sample.disks.get(device)
        if rates is None or not _is_saturated(rates.util, rates.r_await, rates.w_await, d):
            continue  # the run of saturated intervals ends now: no history needed
        since = _saturated_since(ctx.history, device, d, ctx.sample.t)
        if since is None or ctx.sample.t - since < d.saturated_for_s:
            continue
        yield Alert(
            code="disk-saturated",
            severity="warning",
            subject=device,
            message=(
                f"Disk {device} (under {', '.join(paths)}) has been saturated for "
                f"{fmt_duration(ctx.sample.t - since)}: {rates.util:.0f} % busy, requests wait "
                f"{rates.r_await:.1f} ms (read) / {rates.w_await:.1f} ms (write), queue "
                f"{rates.aqu_sz:.1f}, reading {fmt_mbs(rates.read_bps)} and writing "
                f"{fmt_mbs(rates.write_bps)}."
            ),
            fix=(
                "The disk cannot keep up: put the training data on a faster or local disk or "
                "cache it in RAM (/dev/shm), read it in larger sequential chunks (fewer small "
                "files, more DataLoader workers), and write checkpoints and logs to another disk."
            ),
        )


DEVICE_DETECTORS: list[Detector] = [disk_saturated]
