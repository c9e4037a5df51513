"""How fast each filesystem fills: one estimate per filesystem per tick, for every surface.

The disk-filling rule, the CLI, the notebook and the panel all read ``PathState.fill``, which
is computed here once, so no two of them can disagree about the same disk. Free space is
read from the history of the path watched longest on the filesystem; the estimate covers
the current stretch of shrinking free space (since its last high point: space freed ends a
stretch), and ends when free space has stopped going down.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass

from .defaults import DEFAULTS, Defaults
from .history import History
from .model import FillState, PathState, Sample

FilesystemKey = tuple[str, int | None]


@dataclass(frozen=True, slots=True)
class FillEstimate:
    """Least-squares trend of available space. ``rate_bps`` > 0 means it is shrinking."""

    rate_bps: float
    seconds_to_full: float | None
    points: int
    span_s: float = 0.0  # time between the first and the last point of the fit


def fill_estimate(times: Sequence[float], avail_bytes: Sequence[float]) -> FillEstimate | None:
    """Fit avail = a + b*t by ordinary least squares; the fill rate is -b.

    A fit (not first-vs-last) so one checkpoint landing or being deleted does not swing the
    prediction. Time to full extrapolates from the latest reading; ``None`` when not shrinking.
    """
    n = min(len(times), len(avail_bytes))
    if n < 2:
        return None
    # C-level passes (map, sum, max): the detectors fit every filesystem every tick
    ts = list(map(float, times[:n]))
    ys = list(map(float, avail_bytes[:n]))
    t_mean = sum(ts) / n  # centre first: epoch seconds squared lose precision
    y_mean = sum(ys) / n
    dt = list(map(operator.sub, ts, itertools.repeat(t_mean, n)))
    dy = list(map(operator.sub, ys, itertools.repeat(y_mean, n)))
    sxx = sum(map(operator.mul, dt, dt))
    if sxx <= 0:
        return None
    rate = -sum(map(operator.mul, dt, dy)) / sxx
    newest, oldest = max(ts), min(ts)
    latest = ys[ts.index(newest)]
    seconds = max(latest, 0.0) / rate if rate > 0 else None
    return FillEstimate(rate_bps=rate, seconds_to_full=seconds, points=n, span_s=newest - oldest)


def filesystem_key(path: str, p: PathState) -> FilesystemKey:
    """Paths with the same key see the same free space (a directory under a project quota
    reports the quota as its size, so the size is part of the key)."""
    return (p.mountpoint or path, p.total_bytes)


def can_fill(p: PathState) -> bool:
    return not p.read_only and p.responsive and p.avail_bytes is not None


def _stretch_start(times: Sequence[float], avail: Sequence[float], n: int, d: Defaults) -> int:
    """Where the current stretch of shrinking free space starts: after the last time space
    was freed, at its last high point. Wiggles within what the noise floor allows over one
    interval (a filesystem settling its reservations) neither end a stretch nor start one."""
    tol = d.fill_min_rate_bps * max(b - a for a, b in itertools.pairwise(times[n - 3 : n]))
    start = next((i for i in range(n - 1, 0, -1) if avail[i] > avail[i - 1] + tol), 0)
    high = max(avail[start:n])
    return max(i for i in range(start, n) if avail[i] >= high - tol)


def estimate_fill(
    filesystem: str,
    times: Sequence[float],
    avail: Sequence[float],
    defaults: Defaults = DEFAULTS,
) -> FillState:
    """The fill of one filesystem from its recent free-space readings (oldest first)."""
    d = defaults
    n = min(len(times), len(avail))
    if n < 3:
        return FillState(filesystem, "measuring", points=n)
    peak = _stretch_start(times, avail, n, d)
    drops = [i for i in range(peak + 1, n) if avail[i] < avail[i - 1]]
    if not drops:
        trend = fill_estimate(times[:n], avail[:n])
        freeing = trend is not None and -trend.rate_bps > d.fill_min_rate_bps
        if freeing and peak == n - 1:
            return FillState(filesystem, "freeing", rate_bps=trend.rate_bps, points=n)
        return FillState(filesystem, "steady", rate_bps=0.0, points=n)
    stretch = [times[peak], *(times[i] for i in drops)]
    longest_gap = max(b - a for a, b in itertools.pairwise(stretch))
    step = max(b - a for a, b in itertools.pairwise(times[n - 3 : n]))  # the sampling interval
    quiet_s = times[n - 1] - times[drops[-1]]
    if quiet_s > d.fill_quiet_gaps * max(longest_gap, step):
        return FillState(filesystem, "steady", rate_bps=0.0, points=n)  # it stopped
    fit = fill_estimate(times[peak:n], avail[peak:n])
    if fit is None or fit.rate_bps <= d.fill_min_rate_bps:
        return FillState(filesystem, "steady", rate_bps=0.0, points=n)
    return FillState(
        filesystem,
        "filling",
        rate_bps=fit.rate_bps,
        seconds_to_full=fit.seconds_to_full,
        trend_s=times[n - 1] - times[peak],
        points=n - peak,
    )


def is_trend(fill: FillState, defaults: Defaults = DEFAULTS) -> bool:
    """Whether a fill has lasted long enough, for the time it has left, to warn about."""
    if fill.trend != "filling" or fill.seconds_to_full is None:
        return False
    d = defaults
    needed = max(
        d.fill_min_trend_s, min(d.fill_min_span_s, d.fill_trend_share * fill.seconds_to_full)
    )
    return fill.points >= d.fill_min_points and fill.trend_s >= needed


def fill_filesystems(sample: Sample, history: History, defaults: Defaults = DEFAULTS) -> None:
    """Set ``fill`` on every watched path: one estimate per filesystem, read from the path
    watched longest on it (paths are in the order they were added, so its history goes
    back furthest)."""
    fills: dict[FilesystemKey, FillState] = {}
    for path, p in sample.paths.items():
        if not can_fill(p):
            continue
        key = filesystem_key(path, p)
        fill = fills.get(key)
        if fill is None:
            times, avail = history.window(
                "path", path, "avail_bytes", defaults.fill_window_s, now=sample.t
            )
            fill = fills[key] = estimate_fill(key[0], times, avail, defaults)
        p.fill = fill
