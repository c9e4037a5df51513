"""Tick positions and labels for the dashboard's charts, computed in the kernel.

Why here and not in the browser: bqplot's ``num_ticks`` spreads ticks evenly from one end
of the domain to the other (0.152 / 0.305 / 0.457, the last x tick on the plot's edge,
one label repeated three times over a short span), and d3's time ticks follow the
browser's time zone while the header's clock follows the kernel's. So the charts get
explicit ``tick_values`` (round numbers, round clock times) and ``tick_labels`` (24-hour
local time of the kernel, the same clock as the header). They change only when the
window slides past a tick, so they cost almost nothing on the wire.
"""

from __future__ import annotations

import math
import time

# clock steps a time axis may use, seconds: round to the eye in 24-hour time
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


def nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``raw``."""
    if not math.isfinite(raw) or raw <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * power >= raw * (1 - 1e-9):
            return m * power
    return 10.0 * power


def nice_axis(
    peak: float, floor: float = 1.0, intervals: int = 3, keep: float | None = None
) -> tuple[float, list[float]]:
    """A y axis from 0 with round ticks that holds ``peak``: ``(top, ticks)``.

    ``floor`` is the smallest top (an idle disk reads 0-1 MB/s, not 0-0.0004); ``keep`` is
    the current top, kept while the peak still uses more than a third of it, so the scale
    does not flap (each change is a message to the browser).
    """
    peak = peak if math.isfinite(peak) and peak > 0 else 0.0
    if keep is not None and peak <= keep and peak > keep / 3 and keep >= floor:
        top = keep
    else:
        top = max(peak * 1.05, floor)
    step = nice_step(top / intervals)
    top = step * math.ceil(top / step - 1e-9)
    n = round(top / step)
    return top, [round(i * step, 12) for i in range(n + 1)]


def _utc_offset(t: float) -> int:
    return int(time.localtime(t).tm_gmtoff)


def time_ticks(t0: float, t1: float, max_ticks: int = 4) -> tuple[list[float], list[str]]:
    """Round local clock times inside ``[t0, t1]`` (epoch seconds) with their 24-hour labels:
    ``14:05`` when the step is whole minutes (then up to ``max_ticks + 2``, they are
    narrower), else ``14:05:30`` (up to ``max_ticks``). Neighbouring labels always differ."""
    span = t1 - t0
    if not (math.isfinite(span) and span > 0):
        return [], []

    def fits(step: float) -> bool:
        return span / step <= (max_ticks + 2 if step % 60 == 0 else max_ticks)

    step = float(next((s for s in TIME_STEPS if fits(s)), TIME_STEPS[-1]))
    while not fits(step):  # longer than the table: whole multiples of 6 h
        step *= 2
    off = _utc_offset(t1)
    first = math.ceil((t0 + off) / step) * step - off
    ticks = []
    t = first
    while t <= t1 + 1e-6:
        ticks.append(float(t))
        t += step
    return ticks, [clock_label(v, step) for v in ticks]


def clock_label(t: float, step: float) -> str:
    """A tick's 24-hour label: ``14:05`` on whole-minute steps, else ``14:05:30``."""
    return time.strftime("%H:%M" if step % 60 == 0 else "%H:%M:%S", time.localtime(t))
