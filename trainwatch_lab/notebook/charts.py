"""Time-series charts (bqplot) fed from the History, with bounded traffic.

Every chart is one ``Lines`` mark with a shared x array, so a chart update is one comm
message. Arrays are windowed (only the selected window is sent) and downsampled into at most
``MAX_POINTS`` time buckets aligned to the clock (peaks survive: rates/latency keep the
bucket maximum, free space the minimum), y values travel as float32, and a chart only sends
when its arrays actually changed. The bucket width doubles as the redraw throttle: a 10-minute
window redraws every 2.5 s, a 1-minute window every tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from bqplot import Axis, DateScale, Figure, LinearScale, Lines
from ipywidgets import Layout

from ..core.history import History, SeriesKey

MAX_POINTS = 240
# theme-aware: bqplot sets stroke via style(), where CSS variables resolve
PALETTE = [
    "var(--jp-brand-color1)",
    "var(--jp-warn-color1)",
    "var(--jp-success-color1)",
    "var(--jp-error-color1)",
    "var(--jp-info-color1)",
    "var(--jp-brand-color3)",
    "var(--jp-warn-color3)",
    "var(--jp-success-color3)",
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


@dataclass(frozen=True)
class Series:
    """One line: a label and how to compute it from History columns."""

    label: str
    keys: tuple[SeriesKey, ...]
    kind: str = "value"  # "value" | "scaled" | "ratio_pct" | "await"
    scale: float = 1.0


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
        if series.kind == "await":  # keys: (r_await, w_await, r_s, w_s): iostat's combined
            ios = col(2) + col(3)
            combined = (col(0) * col(2) + col(1) * col(3)) / ios
            return np.where(ios > 0, combined, 0.0)
        return col(0) * series.scale


class TimeChart:
    """A bqplot figure with one multi-line mark over clock time."""

    def __init__(
        self,
        title: str,
        y_label: str,
        *,
        agg: str = "max",
        y_max: float | None = None,
        name: str = "",
    ) -> None:
        self.name = name or title
        self.agg = agg
        self.series: list[Series] = []
        self.x_scale = DateScale()
        self.y_scale = LinearScale(min=0.0, max=y_max, allow_padding=False)
        self.lines = Lines(
            x=np.empty(0),
            y=np.empty((0, 0), dtype=np.float32),
            scales={"x": self.x_scale, "y": self.y_scale},
            colors=PALETTE,
            labels=[],
            display_legend=True,
            stroke_width=1.5,
        )
        self.figure = Figure(
            marks=[self.lines],
            axes=[
                Axis(scale=self.x_scale, tick_format="%H:%M:%S", num_ticks=4),
                Axis(
                    scale=self.y_scale,
                    side="left",
                    label=y_label,
                    tick_format=".3~r",
                    num_ticks=4,
                ),
            ],
            title=title,
            legend_location="top-left",
            fig_margin={"top": 32, "bottom": 28, "left": 56, "right": 12},
            layout=Layout(height="200px", width="auto", min_width="280px"),
            animation_duration=0,
        )
        self.figure.add_class("tw-chart")
        self.figure.add_class(f"tw-chart-{self.name}")
        self._x = np.empty(0)
        self._y = np.empty((0, 0), dtype=np.float32)
        self._labels: list[str] = []

    @property
    def points(self) -> int:
        """Points drawn per line (0 until there are two)."""
        return int(self._x.size) if self._x.size >= 2 else 0

    def set_series(self, series: Sequence[Series]) -> None:
        self.series = list(series)

    def series_keys(self) -> list[SeriesKey]:
        return [k for s in self.series for k in s.keys]

    def compute(
        self, t: np.ndarray, cols: dict[SeriesKey, np.ndarray], bucket_s: float
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        n = t.size
        if not self.series or n == 0:
            return np.empty(0), np.empty((0, 0), dtype=np.float32), []
        ys = np.vstack([evaluate(s, cols, n) for s in self.series])
        bx, by = downsample(t, ys, bucket_s, self.agg)
        x_ms = np.round(bx * 1000.0)  # DateScale: ms since the epoch, float64
        return x_ms, by.astype(np.float32), [s.label for s in self.series]

    def push(self, x_ms: np.ndarray, y: np.ndarray, labels: list[str]) -> bool:
        """Send the arrays if they differ from what the browser has; True when sent."""
        same = (
            labels == self._labels
            and x_ms.shape == self._x.shape
            and y.shape == self._y.shape
            and np.array_equal(x_ms, self._x)
            and np.array_equal(y, self._y, equal_nan=True)
        )
        if same:
            return False
        self._x, self._y, self._labels = x_ms, y, labels
        if y.size == 0 or x_ms.size < 2:
            # bqplot squeezes arrays: one point would collapse (n, 1) into a wrong shape, and
            # (0, 0) is rejected, so a chart with under two points is drawn empty
            x_ms, y = np.empty(0), np.empty(0, dtype=np.float32)
        with self.lines.hold_sync():
            if labels != list(self.lines.labels):
                self.lines.labels = labels
            self.lines.x = x_ms.astype("datetime64[ms]") if x_ms.size else np.empty(0)
            self.lines.y = y
        return True
