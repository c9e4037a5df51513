"""How fast each filesystem fills: one estimate per filesystem per tick, for every surface.

The disk-filling rule, the CLI, the notebook and the panel all read ``PathState.fill``, which
is computed here once, so no two of them can disagree about the same disk. Free space is
read from the history of the path watched longest on the filesystem; the estimate covers
the current stretch of shrinking free space (since its last high point: space freed ends a
stretch), taken as bursts of writes (estimate_fill), and ends when free space has stopped
going down.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import operator
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..defaults import DEFAULTS, Defaults
from ..history import History
from ..model import FillState, PathState, Sample

log = logging.getLogger(__name__)

FilesystemKey = tuple[str, int | None]
PACE_INTERVALS = 64  # the sampler's usual interval is the median of this many, at most
# recorded free space of a filesystem in [since, until): (times, avail), oldest first
PastReadings = Callable[[FilesystemKey, float, float, float], tuple[list[float], list[float]]]


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


def _last_drop(avail: Sequence[float]) -> int:
    """Where free space last went down (the last reading, if it never did)."""
    n = len(avail)
    return next((i for i in range(n - 1, 0, -1) if avail[i] < avail[i - 1]), n - 1)


def _pace(times: Sequence[float], last: int) -> float:
    """The sampler's usual interval, up to the last drop (``last``): how the writes are cut
    into bursts must not change while free space stands still, or the fit would move with
    nothing written (a loaded sampler's late tick, then its quick ones, did that)."""
    upto = max(last, 1)
    recent = times[max(0, upto - PACE_INTERVALS) : upto + 1]  # the median of a window: cheap
    return statistics.median(b - a for a, b in itertools.pairwise(recent))


def _stretch_start(
    times: Sequence[float], avail: Sequence[float], n: int, pace: float, d: Defaults
) -> int:
    """Where the current stretch of shrinking free space starts: after the last time space
    was freed, at its last high point. Wiggles within what the noise floor allows over one
    interval (a filesystem settling its reservations) neither end a stretch nor start one."""
    tol = d.fill_min_rate_bps * pace
    start = next((i for i in range(n - 1, 0, -1) if avail[i] > avail[i - 1] + tol), 0)
    high = max(avail[start:n])
    return max(i for i in range(start, n) if avail[i] >= high - tol)


def _bursts(
    times: Sequence[float], drops: list[int], step: float, quiet: float
) -> list[tuple[list[int], float]]:
    """Drops that follow each other within ``quiet`` times the widest gap of the write so
    far (the sampling interval, to begin with) are one write (a save, a download, saves
    every second), each with that widest gap. A write's own pace is what tells a pause
    from a late save: a loaded machine's saves and ticks come late now and then, and a
    write cut in two there restarted its fit and flapped its warning (issue 23)."""
    bursts = [([drops[0]], step)]
    for a, b in itertools.pairwise(drops):
        gap = times[b] - times[a]
        burst, widest = bursts[-1]
        if gap <= quiet * widest:
            burst.append(b)
            bursts[-1] = (burst, max(widest, gap))
        else:
            bursts.append(([b], step))
    return bursts


def _since_last_stop(times: Sequence[float], bursts: list[list[int]], quiet: float) -> int:
    """The first burst after the last pause that had ended a fill: a gap longer than
    ``quiet`` times every gap before it (the views said "stopped" then). What comes after
    it is a new story; averaging the earlier writes into it is a rate nothing writes at."""
    gaps = [times[b[0]] - times[a[-1]] for a, b in itertools.pairwise(bursts)]
    first = 0
    for k in range(1, len(gaps)):
        if k > first and gaps[k] > quiet * max(gaps[first:k]):
            first = k + 1
    return first


def _window_to_last_drop(
    times: Sequence[float], avail: Sequence[float], window_s: float
) -> tuple[Sequence[float], Sequence[float], int]:
    """The ``window_s`` that ends where free space last went down, what came after it, and
    the index of that drop in them: while nothing is written the fit keeps its points, so
    the rate holds and the time to full only counts down (readings sliding out of a window
    fixed to now would move it)."""
    last = _last_drop(avail)
    first = bisect.bisect_left(times, times[last] - window_s)
    return times[first:], avail[first:], last - first


def estimate_fill(
    filesystem: str,
    times: Sequence[float],
    avail: Sequence[float],
    defaults: Defaults = DEFAULTS,
) -> FillState:
    """The fill of one filesystem from its recent free-space readings (oldest first).

    Writes come as bursts (a save, a download in progress). A fill is either the burst
    going on now, or a cadence of at least ``fill_min_bursts`` bursts since the last pause
    that ended a fill, whose gaps have not been outlasted ``fill_quiet_gaps`` times. The rate
    is fitted up to the last drop; while free space then stands still, the time to full
    counts down from there, and a fill that did not end in a full disk when it said it
    would was no fill (a time to full never grows while nothing is written).
    """
    d = defaults
    n = min(len(times), len(avail))
    if n < 3:
        return FillState(filesystem, "measuring", points=n)
    times, avail, last = _window_to_last_drop(times[:n], avail[:n], d.fill_window_s)
    n = len(times)
    if n < 3:  # the readings before the last drop are older than the window (a long pause)
        return FillState(filesystem, "measuring", points=n)
    pace = _pace(times, last)
    peak = _stretch_start(times, avail, n, pace, d)
    drops = [i for i in range(peak + 1, n) if avail[i] < avail[i - 1]]
    if not drops:
        trend = fill_estimate(times[:n], avail[:n])
        freeing = trend is not None and -trend.rate_bps > d.fill_min_rate_bps
        if freeing and peak == n - 1:
            return FillState(filesystem, "freeing", rate_bps=trend.rate_bps, points=n)
        return FillState(filesystem, "steady", rate_bps=0.0, points=n)
    step = max(b - a for a, b in itertools.pairwise(times[n - 3 : n]))  # the sampling interval
    paced = _bursts(times, drops, pace, d.fill_quiet_gaps)
    bursts = [burst for burst, _ in paced]
    bursts = bursts[_since_last_stop(times, bursts, d.fill_quiet_gaps) :]
    quiet_s = times[n - 1] - times[drops[-1]]
    if len(bursts) >= d.fill_min_bursts:  # a cadence of saves
        gaps = [times[b[0]] - times[a[-1]] for a, b in itertools.pairwise(bursts)]
        if quiet_s <= d.fill_quiet_gaps * max(gaps):
            fill = _fill_from(filesystem, times, avail, n, bursts[0][0] - 1, quiet_s, d)
            if fill is not None:
                return fill
    if quiet_s <= d.fill_quiet_gaps * max(step, paced[-1][1]):  # a write going on now
        fill = _fill_from(filesystem, times, avail, n, bursts[-1][0] - 1, quiet_s, d)
        if fill is not None:
            return fill
    return FillState(filesystem, "steady", rate_bps=0.0, points=n)


def _fill_from(
    filesystem: str,
    times: Sequence[float],
    avail: Sequence[float],
    n: int,
    start: int,
    quiet_s: float,
    d: Defaults,
) -> FillState | None:
    """The fill fitted from ``start`` (the reading before its first drop) to the last drop,
    counted down since; None when that is no fill (too slow, or its time is up)."""
    last = n - 1
    while last > start and avail[last] >= avail[last - 1]:
        last -= 1
    fit = fill_estimate(times[start : last + 1], avail[start : last + 1])
    if fit is None or fit.rate_bps <= d.fill_min_rate_bps or fit.seconds_to_full is None:
        return None
    left = fit.seconds_to_full - quiet_s
    if left <= 0:
        return None  # it said the disk would be full by now, and it is not
    return FillState(
        filesystem,
        "filling",
        rate_bps=fit.rate_bps,
        seconds_to_full=left,
        trend_s=times[last] - times[start],
        points=last + 1 - start,
        quiet_s=quiet_s,
    )


def is_trend(fill: FillState, defaults: Defaults = DEFAULTS) -> bool:
    """Whether a fill has lasted long enough, for the time it has left, to warn about."""
    if fill.trend != "filling" or fill.seconds_to_full is None:
        return False
    d = defaults
    left = fill.seconds_to_full + fill.quiet_s  # as it was when free space last went down
    needed = max(d.fill_min_trend_s, min(d.fill_min_span_s, d.fill_trend_share * left))
    return fill.points >= d.fill_min_points and fill.trend_s >= needed


def believed(fill: FillState, defaults: Defaults = DEFAULTS) -> FillState:
    """The fill as it is sent: a rate and a time to full only when they are a trend (the
    evidence disk-filling warns on). Free space going down for a moment (one save) stays
    "filling", with no numbers: no view can show "full in 7 min" beside "Storage OK"."""
    if fill.trend != "filling" or is_trend(fill, defaults):
        return fill
    return replace(fill, rate_bps=None, seconds_to_full=None)


def with_past(
    key: FilesystemKey,
    times: Sequence[float],
    avail: Sequence[float],
    now: float,
    past: PastReadings | None,
    defaults: Defaults = DEFAULTS,
) -> tuple[Sequence[float], Sequence[float]]:
    """A sampler's own readings, preceded by recorded ones (``past(key, since, until, now)``)
    when its own reach less than ``fill_window_s`` back: a sampler started in the middle of
    a fill judges it from the same evidence as one that watched it begin (issue 23). Only
    the missing older part is asked for, the window at most; a reader that fails is none."""
    since = now - defaults.fill_window_s
    first = times[0] if times else now
    if past is None or first <= since:
        return times, avail
    try:
        old_t, old_v = past(key, since, first, now)
    except Exception:  # never into the sampler
        log.debug("trainwatch: reading the recorded free space failed", exc_info=True)
        return times, avail
    cut = bisect.bisect_left(old_t, first)  # strictly older than the sampler's own
    return [*old_t[:cut], *times], [*old_v[:cut], *avail]


def fill_filesystems(
    sample: Sample,
    history: History,
    defaults: Defaults = DEFAULTS,
    past: PastReadings | None = None,
) -> None:
    """Set ``fill`` on every watched path: one estimate per filesystem, read from the path
    watched longest on it (paths are in the order they were added, so its history goes
    back furthest), with numbers only where they are believed (``believed``). ``past``
    supplies recorded readings older than the history holds (``with_past``)."""
    fills: dict[FilesystemKey, FillState] = {}
    for path, p in sample.paths.items():
        if not can_fill(p):
            continue
        key = filesystem_key(path, p)
        fill = fills.get(key)
        if fill is None:
            times, avail = history.window(  # twice: the fit's window ends at the last drop
                "path", path, "avail_bytes", 2 * defaults.fill_window_s, now=sample.t
            )
            times, avail = with_past(key, times, avail, sample.t, past, defaults)
            fill = fills[key] = believed(estimate_fill(key[0], times, avail, defaults), defaults)
        p.fill = fill
