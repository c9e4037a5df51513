"""Time-series charts (bqplot) fed from the History, with bounded traffic.

Every chart is one ``Lines`` mark with a shared x array, so a redraw is one comm message
(each line gets its own x row only while its newest values are missing: ``drawable``).
Arrays are windowed (only the selected window is sent) and downsampled into at most
``MAX_POINTS`` clock-aligned buckets (peaks survive: rates and latency keep the bucket
maximum, space used the maximum too), and a chart only sends when its arrays changed. The
bucket width doubles as the redraw throttle: a 10-minute window redraws every 5 s, a
1-minute window every tick.

Cheap on the wire: x travels as float32 seconds from an origin the chart keeps (half the
bytes of bqplot's float64 dates), and the time axis gets its ticks and 24-hour labels from
the kernel (ticks.py): the kernel's clock, the same as the header's, whatever time zone the
browser is in. The title and legend are a line of HTML above the plot, never over the
lines, and change only when the series do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from bqplot import Axis, Figure, LinearScale, Lines
from ipywidgets import HTML, Layout, VBox

from ...core.history import History, SeriesKey
from ...core.model import df_used_fraction
from ..ticks import clock_label, nice_axis, time_ticks
from ..warnings_html import esc

MAX_POINTS = 120  # ~3 px per point on a 360 px plot; each point costs 4 B per line + 4 B
# the shortest x axis: a first sample (a dot), or a few ticked by hand within a second, sit on
# an axis this long, never a zero-width one; longer data fills the axis (charts scale to the
# data they have until the window fills: 6 samples on a 10 min axis were a sliver at its left)
MIN_SPAN_S = 1.0
RIGHT_EDGE_SHARE = 0.08  # of the axis: a clock label there would not fit inside the plot
LABELS_AHEAD = 4  # ticks labelled beyond the newest one, for the browser's next redraw
REBASE_S = 86400.0  # float32 seconds keep 8 ms steps a day from their origin
# theme-aware: bqplot sets stroke via style(), where CSS variables resolve
PALETTE = [
    "var(--jp-brand-color1)",
    "var(--jp-warn-color1)",
    "var(--jp-success-color1)",
    "var(--jp-info-color1)",
    "var(--jp-error-color1)",
    "var(--jp-brand-color2)",
    "var(--jp-warn-color2)",
    "var(--jp-success-color2)",
]


def bucket_seconds(window_s: float, interval_s: float, max_points: int = MAX_POINTS) -> float:
    """Bucket width: the sampling interval, or coarser so a window fits ``max_points``."""
    return max(interval_s, window_s / max_points)


def downsample(
    t: np.ndarray, ys: np.ndarray, bucket_s: float, agg: str = "max"
) -> tuple[np.ndarray, np.ndarray]:
    """Group samples into clock-aligned buckets; x is each bucket's last sample time.

    ``ys`` has shape (series, samples); NaN marks a missing value and is ignored unless a
    bucket has nothing else (then the line shows a gap).
    """
    if t.size == 0:
        return t, ys.reshape(ys.shape[0], 0)
    if bucket_s <= 0 or t.size < 2:
        return t, ys
    idx = np.floor(t / bucket_s).astype(np.int64)
    starts = np.flatnonzero(np.diff(idx, prepend=idx[0] - 1))
    ends = np.append(starts[1:], t.size) - 1
    if ys.shape[0] == 0:
        return t[ends], ys[:, : starts.size]
    reducer = np.fmin if agg == "min" else np.fmax
    with np.errstate(invalid="ignore"):
        out = reducer.reduceat(ys, starts, axis=1)
    return t[ends], out


def break_gaps(t: np.ndarray, ys: np.ndarray, gap_s: float) -> tuple[np.ndarray, np.ndarray]:
    """A NaN point after each pause longer than ``gap_s``, so the line stops there: a cell
    that held the GIL shows as a gap, not as a straight line drawn over seconds unseen."""
    if t.size < 2:
        return t, ys
    at = np.flatnonzero(np.diff(t) > gap_s)
    if at.size == 0:
        return t, ys
    return np.insert(t, at + 1, t[at] + gap_s / 3), np.insert(ys, at + 1, np.nan, axis=1)


def drawable(x: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[float]] | None:
    """Lines bqplot can draw: ``(x, ys, opacities)``, or None when no line has a value.

    bqplot puts each line's label at its last point and d3 maps a missing value to
    ``undefined`` there (``translate(x,undefined)``, an SVG error in the console), and a line
    with no finite point becomes the path ``d="null"``. So every line must end on a finite
    point: a line whose newest values are missing gets its own x row whose last point repeats
    its newest real one (the NaN between stay a gap: nothing is drawn that was not measured),
    and a line with no value at all gets a placeholder end drawn at opacity 0. Usually every
    line ends on a value and the shared x goes out unchanged.
    """
    finite = np.isfinite(ys)
    if not finite.any():
        return None
    has = finite.any(axis=1)
    opacities = [1.0 if h else 0.0 for h in has]
    if finite[:, -1].all():
        return x, ys, opacities
    n = ys.shape[1]
    last = n - 1 - np.argmax(finite[:, ::-1], axis=1)  # each line's newest finite point
    xs, out = np.tile(x, (ys.shape[0], 1)), ys.copy()
    held = np.flatnonzero(~finite[:, -1] & has)
    xs[held, -1], out[held, -1] = x[last[held]], ys[held, last[held]]
    out[~has, -1] = 0.0  # (drawn at opacity 0)
    return xs, out, opacities


@dataclass(frozen=True)
class Series:
    """One line: a label and how to compute it from History columns."""

    label: str
    keys: tuple[SeriesKey, ...]
    kind: str = "value"  # "value" | "ratio_pct" | "used_pct" | "await"
    scale: float = 1.0
    stacked: bool = False  # drawn on top of the stacked series before it, filled below


def stack(series: Sequence[Series], ys: np.ndarray) -> np.ndarray:
    """Each stacked line at the sum of itself and the stacked lines before it (a missing
    value counts 0 there); a column where every stacked value is missing stays a gap."""
    rows = [i for i, s in enumerate(series) if s.stacked]
    if len(rows) < 2:
        return ys
    part = ys[rows]
    gap = np.isnan(part).all(axis=0)
    summed = np.nancumsum(part, axis=0)
    summed[:, gap] = np.nan
    out = ys.copy()
    out[rows] = summed
    return out


def window_columns(
    history: History, keys: Sequence[SeriesKey], seconds: float, now: float | None = None
) -> tuple[np.ndarray, dict[SeriesKey, np.ndarray]]:
    """Aligned columns of the last ``seconds`` (NaN where a value is missing)."""
    times = history.times()
    if not times:
        return np.empty(0), {}
    end = times[-1] if now is None else now
    cols = history.columns(since=end - seconds, keys=list(dict.fromkeys(keys)))
    t = np.asarray(cols["t"], dtype=np.float64)
    out: dict[SeriesKey, np.ndarray] = {}
    for key in keys:
        values = cols["series"].get(":".join(key))
        if values is None:
            out[key] = np.full(t.size, np.nan)
        else:
            out[key] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return t, out


def evaluate(series: Series, cols: dict[SeriesKey, np.ndarray], n: int) -> np.ndarray:
    def col(i: int) -> np.ndarray:
        return cols.get(series.keys[i], np.full(n, np.nan))

    with np.errstate(invalid="ignore", divide="ignore"):
        if series.kind == "ratio_pct":  # keys: (part, whole)
            return col(0) / col(1) * 100.0
        if series.kind == "used_pct":  # keys: (avail, total, free): df's Use%
            return df_used_fraction(col(1), col(2), col(0)) * 100.0
        if series.kind == "await":  # keys: (r_await, w_await, r_s, w_s): iostat's combined
            ios = col(2) + col(3)
            combined = (col(0) * col(2) + col(1) * col(3)) / ios
            return np.where(ios > 0, combined, 0.0)
        return col(0) * series.scale


def legend_html(title: str, unit: str, labels: Sequence[str], note: str = "") -> str:
    """The line above a plot: its title, its unit and one coloured key per line."""
    keys = "".join(
        f'<span class="tw-key" title="{esc(label)}">'
        f'<i style="background:{PALETTE[i % len(PALETTE)]}"></i>{esc(label)}</span>'
        for i, label in enumerate(labels)
    )
    quiet = f'<span class="tw-muted tw-chart-note">{esc(note)}</span>' if note else ""
    return (
        f'<div class="tw-chart-head"><span class="tw-chart-title">{esc(title)}</span>'
        f'<span class="tw-chart-unit">{esc(unit)}</span>{keys}{quiet}</div>'
    )


class TimeChart:
    """A titled bqplot chart of a few lines over clock time.

    ``figure`` is what a layout places (the title/legend line over the plot); ``plot`` is
    the bqplot Figure. ``y_max`` fixes the y axis (percentages); otherwise it grows to
    round numbers from ``y_floor`` up. ``fill``: the area under each stacked series is
    shaded (Series.stacked), so a stack reads as bands.
    """

    def __init__(
        self,
        title: str,
        unit: str,
        *,
        agg: str = "max",
        y_max: float | None = None,
        y_floor: float = 1.0,
        name: str = "",
        height: int = 160,
        fill: bool = False,
    ) -> None:
        self.name = name or title
        self.title, self.unit = title, unit
        self.agg = agg
        self.y_fixed = y_max
        self.y_floor = y_floor
        self.series: list[Series] = []
        self.origin: float | None = None  # x is float32 seconds since this epoch second
        self.x_scale = LinearScale(allow_padding=False)
        top, ticks = (y_max, _pct_ticks(y_max)) if y_max else nice_axis(0.0, y_floor)
        self.y_scale = LinearScale(min=0.0, max=float(top), allow_padding=False)
        self._build_plot(ticks, height, fill)
        self.head = HTML(legend_html(title, unit, []))
        self.figure = VBox([self.head, self.plot], layout=Layout(min_width="0"))
        self.figure.add_class("tw-chart")
        self.figure.add_class(f"tw-chart-{self.name}")
        self._t = np.empty(0)
        self._y = np.empty((0, 0), dtype=np.float32)
        self._labels: list[str] = []
        self._note = ""

    def _build_plot(self, ticks: list[float], height: int, fill: bool) -> None:
        """The bqplot Lines, axes and Figure over ``self.x_scale``/``self.y_scale``."""
        self.lines = Lines(
            x=np.empty(0, dtype=np.float32),
            y=np.empty((0, 0), dtype=np.float32),
            scales={"x": self.x_scale, "y": self.y_scale},
            colors=PALETTE,
            labels=[],
            display_legend=False,
            stroke_width=1.5,
            fill="bottom" if fill else "none",
            fill_colors=PALETTE,
            fill_opacities=[],
        )
        # explicit ticks only (ticks.py); the axes show once there is data to read
        self.x_axis = Axis(scale=self.x_scale, tick_values=[0.0], grid_lines="none", visible=False)
        self.y_axis = Axis(
            scale=self.y_scale,
            side="left",
            tick_values=ticks,
            tick_format="~g",
            grid_lines="dashed",
            visible=False,
        )
        self.plot = Figure(
            marks=[self.lines],
            axes=[self.x_axis, self.y_axis],
            fig_margin={"top": 8, "bottom": 22, "left": 40, "right": 30},
            padding_y=0.0,
            layout=Layout(height=f"{height}px", width="auto"),
            animation_duration=0,
        )
        self.plot.add_class("tw-plot")

    @property
    def points(self) -> int:
        """Points drawn per line (0 until there are two)."""
        return int(self._t.size) if self._t.size >= 2 else 0

    def set_series(self, series: Sequence[Series]) -> None:
        self.series = list(series)

    def series_keys(self) -> list[SeriesKey]:
        return [k for s in self.series for k in s.keys]

    def compute(
        self, t: np.ndarray, cols: dict[SeriesKey, np.ndarray], bucket_s: float
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Downsampled (epoch seconds, float32 values, labels) of this chart's lines."""
        n = t.size
        if not self.series or n == 0:
            return np.empty(0), np.empty((0, 0), dtype=np.float32), []
        ys = stack(self.series, np.vstack([evaluate(s, cols, n) for s in self.series]))
        bx, by = break_gaps(*downsample(t, ys, bucket_s, self.agg), 3 * bucket_s)
        return bx, by.astype(np.float32), [s.label for s in self.series]

    def push(
        self,
        t: np.ndarray,
        y: np.ndarray,
        labels: list[str],
        note: str = "",
        min_span: float = MIN_SPAN_S,
    ) -> bool:
        """Send the arrays if they differ from what the browser has; True when sent.
        Data shorter than ``min_span`` is drawn from the left on an axis that long."""
        same = (
            labels == self._labels
            and t.shape == self._t.shape
            and y.shape == self._y.shape
            and np.array_equal(t, self._t)
            and np.array_equal(y, self._y, equal_nan=True)
        )
        if note != self._note or labels != self._labels:
            self._note = note
            self.head.value = legend_html(self.title, self.unit, labels, note)
        if same:
            return False
        self._t, self._y, self._labels = t, y, labels
        if t.size == 1:  # one sample: a zero-length segment, drawn as a dot (round caps)
            t, y = np.repeat(t, 2), np.repeat(y, 2, axis=1)
        drawn = drawable(t, y) if y.size and t.size else None
        if drawn is None:
            # (0, 0) is rejected by bqplot: an empty chart (no data, or not one value in
            # it) gets empty arrays and no axes
            with self.lines.hold_sync():
                self.lines.x, self.lines.y = np.empty(0, dtype=np.float32), np.empty(0)
            self._show_axes(False)
            return True
        x, y, opacities = drawn
        if self.origin is None or t[-1] - self.origin > REBASE_S or t[0] < self.origin:
            self.origin = float(math.floor(t[0]))
        lo, hi = float(t[0]), max(float(t[-1]), float(t[0]) + min_span)
        self._set_y_axis(y)
        with self.lines.hold_sync():
            if labels != list(self.lines.labels):
                self.lines.labels = labels
                if self.lines.fill != "none":
                    self.lines.fill_opacities = [0.25 if s.stacked else 0.0 for s in self.series]
            if opacities != list(self.lines.opacities):
                self.lines.opacities = opacities
            self.lines.x = (x - self.origin).astype(np.float32)
            self.lines.y = y  # bqplot squeezes (1, n) to one line of n points: what we want
        # the axis spans [lo, hi] even where the lines drawn stop short of it (a held end)
        self._set_x_axis(lo, hi, fixed=hi > float(np.max(x)))
        self._show_axes(True)
        return True

    def _show_axes(self, show: bool) -> None:
        for axis in (self.x_axis, self.y_axis):
            if axis.visible != show:
                axis.visible = show

    def _set_y_axis(self, y: np.ndarray) -> None:
        if self.y_fixed is not None:
            return
        with np.errstate(invalid="ignore"):
            peak = float(np.nanmax(y)) if np.isfinite(y).any() else 0.0
        top, ticks = nice_axis(peak, self.y_floor, keep=self.y_scale.max)
        if top != self.y_scale.max:
            self.y_scale.max = top
            self.y_axis.tick_values = np.asarray(ticks)

    def _set_x_axis(self, lo: float, hi: float, fixed: bool = False) -> None:
        """Round clock ticks for ``[lo, hi]``; the domain is pinned to it only while the
        data spans less than a minute (set once, then released: two messages)."""
        ticks, labels = time_ticks(lo, hi) if self.origin is not None else ([], [])
        # the axis ends at the newest sample: a label centred on a tick at its very edge
        # would be cut by the plot's edge, so that tick is left out
        edge = hi - RIGHT_EDGE_SHARE * (hi - lo)
        if len(ticks) > 1 and ticks[-1] > edge:
            ticks, labels = ticks[:-1], labels[:-1]
        rel = [round(v - self.origin) for v in ticks] if self.origin is not None else []
        values = np.asarray(rel, dtype=np.float64)
        named = {str(v): text for v, text in zip(rel, labels, strict=True)}
        if len(ticks) > 1 and self.origin is not None:  # the next ticks, labelled already
            step = ticks[1] - ticks[0]
            for k in range(1, LABELS_AHEAD + 2):  # (+1: the one left out at the edge)
                v = ticks[-1] + k * step
                named[str(round(v - self.origin))] = clock_label(v, step)
        if values.size:
            # labels first, in a message of their own, then the values: bqplot draws new
            # values with the labels it has when they arrive (its formatter holds the dict,
            # and its transition writes the text a frame later), so a value without a label
            # yet showed as raw seconds ("7") until the next change; the ticks on screen
            # keep theirs meanwhile
            shown = dict(self.x_axis.tick_labels or {})
            keep = {k: shown.get(k) for k in (str(round(v)) for v in self.x_axis.tick_values)}
            following = {**{k: v for k, v in keep.items() if v is not None}, **named}
            if following != shown:
                self.x_axis.tick_labels = following
            if not np.array_equal(values, np.asarray(self.x_axis.tick_values)):
                self.x_axis.tick_values = values
        want = (lo - self.origin, hi - self.origin) if fixed and self.origin is not None else None
        now = (self.x_scale.min, self.x_scale.max)
        if want is None and now != (None, None):
            with self.x_scale.hold_sync():
                self.x_scale.min = self.x_scale.max = None
        elif want is not None and now != want:
            with self.x_scale.hold_sync():
                self.x_scale.min, self.x_scale.max = want

    def close(self) -> None:
        for w in (self.lines, self.x_axis, self.y_axis, self.x_scale, self.y_scale, self.plot):
            w.close()
        self.head.close()
        self.figure.close()


def _pct_ticks(top: float) -> list[float]:
    return [top * i / 4 for i in range(5)]
