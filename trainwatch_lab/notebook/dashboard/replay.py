"""The replay: ``%trainwatch --since 8h`` and ``TrainWatch(since=...)`` show a window of the
machine's recorded history (core.record) instead of live samples.

Above the charts, each run that ended in the window in its sentence with the evidence
(core.record.why, the words of ``trainwatch-lab history why``); then the dashboard's charts
(GPU, disk MB/s, space used) drawn from the record, with the events as markers (a dashed
rule and a triangle whose tooltip is the event's text), and the events listed under them.

The read runs on a helper thread (the store may sit on a slow disk: the kernel's main thread
never waits on it longer than ``replay_wait_s``) and fills the widget in when it ends; it
opens the store read-only, so a replay never changes the history nor creates a file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np
from bqplot import Lines, Scatter, Tooltip

from ...core.defaults import DEFAULTS, Defaults
from ...core.history import SeriesKey
from ...core.record.replay import NoHistory, Recorded, load, window
from ...core.record.store import StoreError
from ..warnings_html import STYLE, esc
from .bqcharts import Series, TimeChart, bucket_seconds
from .charts import filesystem_label, gpu_series, io_series, make_chart
from .view import DASH_STYLE, clock
from .warnings import WARNINGS_STYLE

# events drawn as markers on the charts (all of them are listed under the charts)
MARKED = (
    "warning-raised",
    "process-ended",
    "run-ended",
    "kernel-ended",
    "kernel-restarted",
    "mount-changed",
    "checkpoint",
)
MAX_MARKERS = 200  # per chart: the newest ones
MAX_LISTED = 200  # events listed under the charts: the newest ones
ENDED = ("process-ended", "run-ended", "kernel-ended")
# grey: the lines' palette keeps its colours; a run's end in the error colour
MARKER_COLOR = "var(--jp-ui-font-color2)"
END_COLOR = "var(--jp-error-color1)"

REPLAY_STYLE = """
.tw-replay-endings .tw-ending { margin: 2px 0; padding-left: 8px; line-height: 1.4;
  border-left: 3px solid var(--jp-border-color1); color: var(--jp-ui-font-color0); }
.tw-replay-endings .tw-ending[data-badly="1"] { border-left-color: var(--jp-error-color1); }
.trainwatch .tw-events summary { cursor: pointer; color: var(--jp-ui-font-color1); }
.trainwatch .tw-events table td { padding: 0 8px 0 0; vertical-align: top; }
"""


# -- what the record holds, as the dashboard's series ------------------------------------


def _parts(key: str) -> tuple[str, str, str]:
    """``path:/a:b:avail_bytes`` -> ("path", "/a:b", "avail_bytes") (a path may hold ':')."""
    kind, rest = key.split(":", 1)
    name, _, fld = rest.rpartition(":")
    return kind, name, fld


def space_series(rec: Recorded) -> list[Series]:
    """One line per recorded path's % used; paths whose readings are the same (one
    filesystem, one recorder) are one line, named by the shortest with how many more."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for key in rec.series:
        kind, name, fld = _parts(key)
        if kind != "path" or fld != "avail_bytes" or f"path:{name}:total_bytes" not in rec.series:
            continue
        same = (tuple(rec.series[key]), tuple(rec.series[f"path:{name}:total_bytes"]))
        groups.setdefault(same, []).append(name)
    out = []
    for names in groups.values():
        names.sort(key=lambda n: (len(n), n))  # named by the shortest: nearest the mount
        more = f" (+{len(names) - 1})" if len(names) > 1 else ""
        keys = tuple(("path", names[0], f) for f in ("avail_bytes", "total_bytes", "free_bytes"))
        out.append(Series(filesystem_label(names[0], None) + more, keys, kind="used_pct"))
    return out


def series_of(rec: Recorded) -> dict[str, list[Series]]:
    """The charts a replay draws and their lines, from the keys the record holds."""
    names: dict[str, set[str]] = {"gpu": set(), "disk": set()}
    for key in rec.series:
        kind, name, _ = _parts(key)
        if kind in names:
            names[kind].add(name)
    gpus = sorted(names["gpu"], key=lambda i: (len(i), i))
    charts = {"gpu": gpu_series(gpus)} if gpus else {}
    charts["io"] = io_series(sorted(names["disk"]))
    charts["space"] = space_series(rec)
    return charts


def columns(rec: Recorded, keys: Sequence[SeriesKey]) -> tuple[np.ndarray, dict[SeriesKey, Any]]:
    """The record's aligned columns as the charts take them (NaN where missing)."""
    t = np.asarray(rec.t, dtype=np.float64)
    cols = {}
    for key in keys:
        values = rec.series.get(":".join(key))
        cols[key] = (
            np.full(t.size, np.nan)
            if values is None
            else np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        )
    return t, cols


def step_of(t: np.ndarray) -> float:
    """The record's usual step (seconds between points), 1 s when it cannot tell."""
    return float(np.median(np.diff(t))) if t.size > 1 else 1.0


# -- words ------------------------------------------------------------------------------


def span_text(rec: Recorded) -> str:
    day = time.strftime("%Y-%m-%d", time.localtime(rec.since))
    return f"{day} {clock(rec.since)} to {clock(rec.until)}"


def endings_html(endings: Sequence[dict[str, Any]]) -> str:
    if not endings:
        return "<div class='tw-ending tw-muted'>No run ended in this window.</div>"
    return "".join(
        f"<div class='tw-ending' data-badly='{int(bool(e.get('badly')))}'>{esc(e['sentence'])}"
        "</div>"
        for e in endings
    )


def events_html(events: Sequence[dict[str, Any]]) -> str:
    shown = list(events)[-MAX_LISTED:]
    more = len(events) - len(shown)
    rows = "".join(
        f"<tr><td>{clock(e['t'])}</td><td>{esc(e['kind'])}</td><td>{esc(e['text'])}</td></tr>"
        for e in shown
    )
    older = f"<div class='tw-muted'>and {more} older</div>" if more else ""
    return (
        f"<details class='tw-events'><summary>Events ({len(events)})</summary>"
        f"<div class='tw-scroll'><table>{rows}</table></div>{older}</details>"
    )


# -- markers ----------------------------------------------------------------------------


class Markers:
    """The events of a window on one chart: a dashed vertical rule each, and a triangle at
    the top whose tooltip is the event's text. Drawn after the chart's lines (its x
    origin and y top are known then)."""

    def __init__(self, chart: TimeChart) -> None:
        self.chart = chart
        scales = {"x": chart.x_scale, "y": chart.y_scale}
        empty = np.empty(0, dtype=np.float32)
        self.rules = Lines(
            x=empty,
            y=empty,
            scales=scales,
            colors=[MARKER_COLOR],
            stroke_width=1,
            line_style="dashed",
        )
        self.points = Scatter(
            x=empty,
            y=empty,
            scales=scales,
            marker="triangle-down",
            colors=[MARKER_COLOR],
            default_size=40,
            names=[],
            display_names=False,
            tooltip=Tooltip(fields=["name"], labels=["event"]),
        )
        chart.plot.marks = [*chart.plot.marks, self.rules, self.points]
        self.count = 0

    def show(self, events: Sequence[dict[str, Any]], lo: float, hi: float) -> None:
        chart = self.chart
        shown = [e for e in events if e["kind"] in MARKED and lo <= e["t"] <= hi][-MAX_MARKERS:]
        self.count = len(shown)
        if not shown or chart.origin is None:
            return
        top = float(chart.y_scale.max or 1.0)
        x = np.array([e["t"] - chart.origin for e in shown], dtype=np.float32)
        texts = [f"{clock(e['t'])} {e['text']}" for e in shown]
        colors = [END_COLOR if e["kind"] in ENDED else MARKER_COLOR for e in shown]
        with self.rules.hold_sync():
            self.rules.colors = colors  # (bqplot reuses a mark's colours per line and point)
            self.rules.x = np.repeat(x[:, None], 2, axis=1)
            self.rules.y = np.tile(np.array([0.0, top], dtype=np.float32), (x.size, 1))
        with self.points.hold_sync():
            self.points.x = x
            self.points.y = np.full(x.size, top * 0.96, dtype=np.float32)
            self.points.names = texts
            self.points.colors = colors

    def close(self) -> None:
        for mark in (self.rules, self.points, self.points.tooltip):
            mark.close()


# -- the widget -------------------------------------------------------------------------


class Replay(widgets.VBox):
    """A recorded window in the dashboard's form. ``since``/``until``: seconds ago, "8h",
    "03:00", an ISO time or a datetime (core.record.replay.window; ValueError, one line,
    when wrong); ``path``: a store file other than this machine's. ``wait(timeout)`` says
    whether the read has ended; ``error`` why nothing is drawn (``no_history``: none)."""

    def __init__(
        self,
        since: Any,
        until: Any = None,
        *,
        path: str | None = None,
        defaults: Defaults = DEFAULTS,
    ) -> None:
        self.since, self.until = window(since, until)
        super().__init__()
        self.add_class("tw-root")
        self.add_class("trainwatch")
        self.add_class("tw-replay")
        self.path, self.defaults = path, defaults
        self.recorded: Recorded | None = None
        self.error: str | None = None
        self.no_history = False
        self.charts: dict[str, TimeChart] = {}
        self.markers: dict[str, Markers] = {}
        self.status = widgets.HTML(self._header_html("reading"))
        self.endings = widgets.HTML("")
        self.endings.add_class("tw-replay-endings")
        self.grid = widgets.GridBox(
            [], layout=widgets.Layout(grid_template_columns="repeat(auto-fit, minmax(300px, 1fr))")
        )
        self.grid.add_class("tw-charts")
        self.events = widgets.HTML("")
        style = widgets.HTML(f"<style>{STYLE}{DASH_STYLE}{WARNINGS_STYLE}{REPLAY_STYLE}</style>")
        self.children = [style, self.status, self.endings, self.grid, self.events]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="trainwatch-replay", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the read has ended (drawn, or ``error`` says why not)."""
        return self._done.wait(timeout)

    # -- the helper thread ------------------------------------------------------------
    def _read(self) -> None:
        try:
            rec = load(self.since, self.until, self.path, defaults=self.defaults)
        except NoHistory as exc:
            self.no_history = True
            self._fail(str(exc))
        except StoreError as exc:
            self._fail(str(exc))
        except Exception as exc:  # a damaged file, a busy disk: one line, never a traceback
            self._fail(f"reading the recorded history failed: {exc}")
        else:
            try:
                self._draw(rec)
            except Exception as exc:
                self._fail(f"drawing the recorded history failed: {exc}")
        finally:
            self._done.set()

    def _fail(self, message: str) -> None:
        self.error = message
        self.status.value = self._header_html("error")

    def _draw(self, rec: Recorded) -> None:
        self.recorded = rec
        self.endings.value = endings_html(rec.endings)
        lines = series_of(rec)
        t, _ = columns(rec, [])
        bucket = bucket_seconds(float(t[-1] - t[0]) if t.size else 0.0, step_of(t))
        figures = []
        for name, series in lines.items():
            chart = self.charts[name] = make_chart(name)
            chart.set_series(series)
            tt, cols = columns(rec, chart.series_keys())
            x, y, labels = chart.compute(tt, cols, bucket)
            chart.push(x, y, labels, note="" if series else "nothing recorded")
            if x.size:
                marks = self.markers[name] = Markers(chart)
                marks.show(rec.events, float(x[0]), float(x[-1]))
            figures.append(chart.figure)
        self.grid.children = tuple(figures)
        self.events.value = events_html(rec.events)
        self.status.value = self._header_html("replay")

    # -- words ------------------------------------------------------------------------
    def _header_html(self, state: str) -> str:
        rec = self.recorded
        if state == "error":
            said = self.error or ""
        elif rec is None:
            said = "reading the recorded history…"
        else:
            ended = len(rec.endings)
            said = (
                f"{ended} run{'s' * (ended != 1)} ended · {len(rec.events)} events · "
                f"{len(rec.t)} points" + (" (the rest not read: too long)" if rec.truncated else "")
            )
        level = (
            "warning"
            # ended badly: core.record.why's rule, the panel's cards follow it too
            if state == "error" or (rec and any(e.get("badly") for e in rec.endings))
            else "ok"
        )
        when = f"{clock(self.since)} to {clock(self.until)}"
        return (
            f"<div class='tw-head tw-status' data-state='{state}' data-kind='replay' "
            f"data-level='{level}'><b class='tw-verdict'>Replay · {esc(when)}</b>"
            f"<span class='tw-facts'>{esc(said)}</span></div>"
        )

    def text(self) -> str:
        """The replay in plain text: what frontends without widgets show, and the magic's
        fallback (the words of ``trainwatch-lab history why``)."""
        head = f"trainwatch replay {clock(self.since)} to {clock(self.until)}"
        if self.error is not None:
            return f"trainwatch: {self.error}"
        rec = self.recorded
        if rec is None:
            return f"{head}: reading the recorded history…"
        lines = [f"{head} ({span_text(rec)}), from {rec.path}"]
        lines += [f"  {e['sentence']}" for e in rec.endings] or ["  no run ended in this window"]
        drawn = ", ".join(f"{n} {c.points} points" for n, c in self.charts.items())
        lines.append(f"  {len(rec.events)} events; charts: {drawn or 'none'}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(data, tuple):
            data = data[0]
        data = dict(data)
        data["text/plain"] = self.text()
        return data

    def close(self) -> None:
        for marks in getattr(self, "markers", {}).values():  # (none if __init__ refused)
            marks.close()
        for chart in getattr(self, "charts", {}).values():
            chart.close()
        super().close()
