"""The live dashboard: ``TrainWatch(paths=[...], interval=1.0)``, also what ``%trainwatch`` shows.

It subscribes to a Sampler and updates widget state from the sampler thread, so it keeps
moving while other cells run (widget state goes over comm messages, which ipykernel 6 and 7
both send from any thread; no cell output is involved). Each tick sends only what changed:
HTML panes whose text is unchanged send nothing (traitlets skips equal values) and charts
send windowed, downsampled arrays at most once per bucket (see charts.py).

Frontends without widgets (nbconvert HTML, terminal IPython) get a text/HTML snapshot from
``_repr_mimebundle_``; ``stop()`` refreshes that snapshot in the displayed output.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import ipywidgets as widgets

from ..advice.text import fill_text
from ..core.defaults import DEFAULTS, GIB, Defaults
from ..core.history import SeriesKey, capacity_for
from ..core.model import Sample
from ..core.paths import normalise
from ..core.sampler import Sampler
from .charts import Series, TimeChart, bucket_seconds, window_columns
from .export import ExportError, write_file
from .inline import InlineAlerts, attach
from .settings import MAX_HISTORY_SAMPLES as MAX_HISTORY_SAMPLES  # re-exported
from .settings import check_settings
from .summary import (
    STYLE,
    alert_html,
    esc,
    latency_text,
    mount_text,
    snapshot_html,
    snapshot_text,
    space_text,
    watched_devices,
)

WINDOW_CHOICES: tuple[tuple[str, float], ...] = (
    ("1 min", 60.0),
    ("5 min", 300.0),
    ("10 min", 600.0),
    ("30 min", 1800.0),
    ("1 h", 3600.0),
)


def new_sampler(
    paths: Iterable[str] = (),
    *,
    interval: float = DEFAULTS.interval_s,
    probe: bool = True,
    gpu: bool = True,
    window_s: float = DEFAULTS.window_s,
    defaults: Defaults = DEFAULTS,
) -> Sampler:
    """The shared sampler stack watching this kernel's process tree (its DataLoader workers
    included); history long enough for the largest window anyone can pick."""
    from ..monitor import make_sampler

    keep_s = max(window_s, defaults.history_s)
    return make_sampler(
        [normalise(p) for p in paths],
        pid=os.getpid(),
        interval=interval,
        probe=probe,
        gpu=gpu,
        defaults=defaults,
        history_capacity=capacity_for(keep_s, interval),
    )


def window_label(seconds: float) -> str:
    for label, value in WINDOW_CHOICES:
        if value == seconds:
            return label
    from ..advice.text import fmt_duration

    return fmt_duration(seconds)


class TrainWatch(widgets.VBox):
    """Storage and GPU next to the running cell, as one widget.

    ``paths``: directories to watch (log dir, checkpoint dir, data dir); more can be added
    with ``add_path``. ``gpus``: restrict GPU charts to these CUDA indices (None: all).
    ``sampler``: share an existing Sampler (then ``stop()`` leaves it running).
    ``inline``: also show new warnings under the running cell (an InlineAlerts to share).
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
        interval: float = DEFAULTS.interval_s,
        *,
        window: float = DEFAULTS.window_s,
        probe: bool = True,
        gpus: Sequence[int] | None = None,
        gpu: bool = True,
        sampler: Sampler | None = None,
        inline: bool | InlineAlerts = True,
        defaults: Defaults = DEFAULTS,
        start: bool = True,
    ) -> None:
        if sampler is not None:  # a shared sampler ticks at its own pace
            interval = sampler.interval
        keys, interval, window = check_settings(paths, interval, window)
        super().__init__()
        self.defaults = defaults
        self.gpu_filter = None if gpus is None else sorted(set(int(i) for i in gpus))
        self.gpu_enabled = gpu
        self._owns_sampler = sampler is None
        self.sampler = sampler or new_sampler(
            keys, interval=interval, probe=probe, gpu=gpu, window_s=window, defaults=defaults
        )
        if sampler is not None:
            for p in keys:
                self.add_path(p)
        self.window_s = float(window)
        self.paused = False
        self.stopped = False
        self.samples = 0
        self.chart_updates = 0
        self._lock = threading.RLock()
        self._last_chart_t = -math.inf
        self._display_handle: Any = None
        self._unsubscribe: Any = None
        self._inline = None
        self._build()
        if inline:
            self._attach_inline(inline)
        if start:
            self.start()

    # -- layout ----------------------------------------------------------------------
    def _build(self) -> None:
        self.add_class("tw-root")
        self.add_class("trainwatch")
        self.style_html = widgets.HTML(f"<style>{STYLE}{DASH_STYLE}</style>")
        self.title = widgets.HTML('<span class="tw-title">trainwatch</span>')
        self.status = widgets.HTML(self._status_html())
        self.status.add_class("tw-status-pane")
        options = [(label, s) for label, s in WINDOW_CHOICES if s <= self._max_window()]
        if self.window_s not in [s for _, s in options]:
            options.append((window_label(self.window_s), self.window_s))
            options.sort(key=lambda o: o[1])
        self.window_select = widgets.Dropdown(
            options=options,
            value=self.window_s,
            description="window",
            layout=widgets.Layout(width="160px"),
        )
        self.window_select.observe(self._on_window, names="value")
        self.pause_button = widgets.ToggleButton(
            value=False,
            description="Pause",
            icon="pause",
            tooltip="Freeze the charts (sampling and warnings go on)",
            layout=widgets.Layout(width="100px"),
        )
        self.pause_button.observe(self._on_pause, names="value")
        self.export_button = widgets.Button(
            description="Export CSV",
            icon="download",
            tooltip="Write the whole history to a CSV file next to the notebook",
            layout=widgets.Layout(width="120px"),
        )
        self.export_button.on_click(lambda _b: self.export_csv())
        self.export_status = widgets.HTML("")
        controls = widgets.HBox(
            [self.title, self.status, self.window_select, self.pause_button, self.export_button],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.paths_pane = widgets.HTML(
            '<div class="tw-muted">no watched paths yet (add one: '
            "<code>%trainwatch PATH</code> or <code>.add_path(PATH)</code>)</div>"
        )
        self.alerts_pane = widgets.HTML("")
        self.alerts_pane.add_class("tw-alerts-pane")
        self.gpu_note = widgets.HTML(
            '<div class="tw-muted">GPU: waiting for the first sample</div>'
        )
        self.charts = {
            "gpu": TimeChart("GPU utilization / memory", "%", y_max=100.0, name="gpu"),
            "io": TimeChart("Disk throughput", "MiB/s", name="io"),
            "await": TimeChart("Disk await", "ms", name="await"),
            "util": TimeChart("Disk %util", "%", y_max=100.0, name="util"),
            "space": TimeChart("Free space", "GiB", agg="min", name="space"),
        }
        self.gpu_note.add_class("tw-gpu-note-pane")
        self.grid = widgets.GridBox(
            [c.figure for name, c in self.charts.items() if name != "gpu"],
            layout=widgets.Layout(
                grid_template_columns="repeat(auto-fit, minmax(340px, 1fr))", width="100%"
            ),
        )
        self.children = [
            self.style_html,
            controls,
            self.paths_pane,
            self.alerts_pane,
            self.gpu_note,
            self.grid,
            self.export_status,
        ]

    def _max_window(self) -> float:
        capacity = self.sampler.history.capacity
        return capacity * self.sampler.interval

    # -- lifecycle -------------------------------------------------------------------
    def start(self, run_sampler: bool = True) -> TrainWatch:
        """Subscribe and start sampling; ``run_sampler=False`` only subscribes (for a sampler
        someone else ticks, e.g. ``sampler.tick()`` from a training loop)."""
        with self._lock:
            if self._unsubscribe is None:
                self._unsubscribe = self.sampler.subscribe(self._on_sample)
            self.stopped = False
        if run_sampler:
            self.sampler.start()
        return self

    def stop(self, reason: str = "stopped") -> None:
        """Stop updating (and sampling, when this widget owns its sampler); keeps the charts."""
        with self._lock:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            if self._inline_unsub is not None:
                self._inline_unsub()
                self._inline_unsub = None
            self.stopped = True
            self._stop_reason = reason
        if self._owns_sampler:
            self.sampler.close()
        with self._lock:
            self.status.value = self._status_html()
        if self._display_handle is not None:
            with contextlib.suppress(Exception):
                self._display_handle.update(self)

    def close(self) -> None:
        if getattr(self, "_lock", None) is None:  # __init__ refused its arguments: nothing built
            return
        self.stop()
        for chart in self.charts.values():
            chart.figure.close()
        super().close()

    @property
    def history(self) -> Any:
        return self.sampler.history

    @property
    def points(self) -> int:
        """Points currently drawn in the throughput chart (what the browser test counts)."""
        return self.charts["io"].points

    def add_path(self, path: str | os.PathLike[str]) -> str:
        source = self.sampler.find_source("paths")
        if source is None:
            raise RuntimeError("this sampler has no paths source")
        return source.add(normalise(path))  # type: ignore[attr-defined]

    def paths(self) -> list[str]:
        source = self.sampler.find_source("paths")
        return list(getattr(source, "paths", []))

    # -- inline alerts ---------------------------------------------------------------
    _inline_unsub: Any = None

    def _attach_inline(self, inline: bool | InlineAlerts) -> None:
        """Warnings that start while a cell runs also go under that cell (inline.py)."""
        if not isinstance(inline, InlineAlerts):
            inline = attach()
        if inline is not None:
            self._inline = inline
            self._inline_unsub = self.sampler.subscribe(inline.on_sample)

    # -- controls --------------------------------------------------------------------
    def _on_window(self, change: dict[str, Any]) -> None:
        with self._lock:
            self.window_s = float(change["new"])
            self._last_chart_t = -math.inf
            self._refresh(force=True)

    def _on_pause(self, change: dict[str, Any]) -> None:
        with self._lock:
            self.paused = bool(change["new"])
            self.pause_button.description = "Resume" if self.paused else "Pause"
            self.pause_button.icon = "play" if self.paused else "pause"
            if not self.paused:
                self._refresh(force=True)
            else:
                self.status.value = self._status_html()

    def pause(self) -> None:
        self.pause_button.value = True

    def resume(self) -> None:
        self.pause_button.value = False

    def export_csv(
        self,
        path: str | os.PathLike[str] | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Write the retained history as CSV; returns the file's path.

        The write goes through the mount guard (notebook/export.py): the disk may be the
        slow one, or a share that stopped answering. The outcome shows under the buttons;
        ``wait=True`` also raises ExportError (one line) when the file was not written.
        """
        target = normalise(path or f"trainwatch-{time.strftime('%Y%m%d-%H%M%S')}.csv")
        text = self.history.to_csv()
        rows = max(0, text.count("\n") - 1)
        self.export_status.value = f'<span class="tw-muted">writing {esc(target)} …</span>'
        failure: list[ExportError] = []

        def write() -> None:
            try:
                write_file(target, text, timeout=timeout)
            except ExportError as exc:
                failure.append(exc)
                self.export_status.value = (
                    f'<span class="tw-kind-shared tw-export-failed">CSV export failed: '
                    f"{esc(exc)}</span>"
                )
                return
            rel = os.path.relpath(target) if target.startswith(os.getcwd() + os.sep) else None
            link = f' (<a href="{esc(rel)}" download>{esc(rel)}</a>)' if rel else ""
            self.export_status.value = (
                f'<span class="tw-export" data-path="{esc(target)}">Saved {rows} samples to '
                f"<code>{esc(target)}</code>{link}</span>"
            )

        # bounded by the guard's timeout: this thread never blocks on the filesystem itself
        thread = threading.Thread(target=write, name="trainwatch-export", daemon=True)
        thread.start()
        if wait:
            thread.join()
            if failure:
                raise failure[0]
        return target

    # -- updates (sampler thread) ----------------------------------------------------
    def _on_sample(self, sample: Sample) -> None:
        with self._lock:
            self.samples += 1
            if self.stopped:
                return
            if self.paused:
                self.status.value = self._status_html()
                return
            self._refresh(sample)

    def refresh(self) -> None:
        """Redraw now from the history (e.g. after a test ticked the sampler by hand)."""
        with self._lock:
            self._refresh(force=True)

    def _refresh(self, sample: Sample | None = None, force: bool = False) -> None:
        sample = sample or self.sampler.latest
        if sample is None:
            return
        self.paths_pane.value = self._paths_html(sample)
        self.alerts_pane.value = self._alerts_html(sample)
        self._update_gpu_note(sample)
        # while the data is shorter than the window there is nothing to downsample: draw
        # every tick, so the first line appears after two samples, not two 2.5 s buckets
        span = max(len(self.history), 1) * self.sampler.interval
        bucket = bucket_seconds(min(self.window_s, span), self.sampler.interval)
        if sample.t < self._last_chart_t:  # the clock went back: redraw from scratch
            self._last_chart_t = -math.inf
        if force or sample.t - self._last_chart_t >= bucket - 1e-6:
            self._last_chart_t = sample.t
            self._update_charts(sample, bucket)
        self.status.value = self._status_html()

    def _status_html(self) -> str:
        if self.stopped:
            state = getattr(self, "_stop_reason", "stopped")
        elif self.paused:
            state = "paused"
        elif self.samples == 0:
            state = "waiting for the first sample"
        else:
            state = "live"
        latest = self.sampler.latest if hasattr(self, "sampler") else None
        clock = time.strftime("%H:%M:%S", time.localtime(latest.t)) if latest else "—"
        points = self.charts["io"].points if hasattr(self, "charts") else 0
        return (
            f'<span class="tw-status tw-muted" data-state="{esc(state)}" '
            f'data-samples="{self.samples}" data-points="{points}">'
            f"{esc(state)} · every {self.sampler.interval:g} s · {self.samples} samples · "
            f"last {clock}</span>"
        )

    def _paths_html(self, sample: Sample) -> str:
        if not sample.paths:
            return self.paths_pane.value
        rows = []
        for path, p in sorted(sample.paths.items()):
            exists = "" if p.exists else ' <span class="tw-muted">(does not exist yet)</span>'
            rows.append(
                f'<tr data-path="{esc(path)}" data-kind="{esc(p.kind)}">'
                f"<td><code>{esc(path)}</code>{exists}</td>"
                f'<td class="tw-kind-{esc(p.kind)}">{esc(mount_text(p))}</td>'
                f"<td>{esc(latency_text(p))}</td><td>{esc(space_text(p))}</td>"
                f"<td>{esc(fill_text(p.fill))}</td></tr>"
            )
        return (
            '<table class="tw-table tw-paths"><tr><th>watched path</th><th>mount</th>'
            "<th>write latency</th><th>free space</th><th>trend</th></tr>"
            f"{''.join(rows)}</table>"
        )

    def _alerts_html(self, sample: Sample) -> str:
        """Warnings in full (numbers + fix); info notes (no GPU...) as one muted line each."""
        serious = [a for a in sample.warnings if a.severity != "info"]
        notes = [a for a in sample.warnings if a.severity == "info"]
        body = "".join(alert_html(a) for a in serious) or (
            '<div class="tw-muted tw-no-warnings">no warnings</div>'
        )
        body += "".join(
            f'<div class="tw-muted tw-note" data-code="{esc(a.code)}" title="{esc(a.fix)}">'
            f"ℹ️ {esc(a.message)}</div>"
            for a in notes
            if a.code != "gpu-unavailable"  # the GPU note above the charts says it already
        )
        return body

    def _gpus(self, sample: Sample) -> list[Any]:
        return [g for g in sample.gpus if self.gpu_filter is None or g.index in self.gpu_filter]

    def _update_gpu_note(self, sample: Sample) -> None:
        """GPU chart in the grid when there is a GPU; otherwise a one-line note instead."""
        gpus = self._gpus(sample)
        chart = self.charts["gpu"].figure
        others = [c.figure for name, c in self.charts.items() if name != "gpu"]
        if gpus:
            if self.grid.children[:1] != (chart,):
                self.grid.children = (chart, *others)
            self.gpu_note.value = ""
            return
        if not self.gpu_enabled:
            reason = "GPU monitoring is off."
        elif sample.gpus and self.gpu_filter is not None:
            reason = f"none of the GPUs {self.gpu_filter} is present."
        else:
            reason = sample.notes.get("gpus", "no GPU reported.")
        self.gpu_note.value = f'<div class="tw-gpu-note tw-muted">GPU: {esc(reason)}</div>'
        if self.grid.children[:1] == (chart,):
            self.grid.children = tuple(others)

    def _update_charts(self, sample: Sample, bucket: float) -> None:
        devices = watched_devices(sample)
        gpus = self._gpus(sample)
        self.charts["gpu"].set_series(
            [
                s
                for g in gpus
                for s in (
                    Series(f"GPU{g.index} util", (("gpu", str(g.index), "util_pct"),)),
                    Series(
                        f"GPU{g.index} mem",
                        (
                            ("gpu", str(g.index), "mem_used_bytes"),
                            ("gpu", str(g.index), "mem_total_bytes"),
                        ),
                        kind="ratio_pct",
                    ),
                )
            ]
        )
        self.charts["io"].set_series(
            [
                s
                for d in devices
                for s in (
                    Series(f"{d} read", (("disk", d, "rmb_s"),)),
                    Series(f"{d} write", (("disk", d, "wmb_s"),)),
                )
            ]
        )
        self.charts["await"].set_series(
            [
                Series(
                    f"{d} await",
                    (
                        ("disk", d, "r_await"),
                        ("disk", d, "w_await"),
                        ("disk", d, "r_s"),
                        ("disk", d, "w_s"),
                    ),
                    kind="await",
                )
                for d in devices
            ]
        )
        self.charts["util"].set_series([Series(d, (("disk", d, "util"),)) for d in devices])
        self.charts["space"].set_series(
            [
                Series(_short(p), (("path", p, "avail_bytes"),), scale=1 / GIB)
                for p in sorted(sample.paths)
            ]
        )
        keys: list[SeriesKey] = [k for c in self.charts.values() for k in c.series_keys()]
        t, cols = window_columns(self.history, keys, self.window_s, now=sample.t)
        sent = False
        for chart in self.charts.values():
            if chart.name == "gpu" and not gpus:
                continue
            x, y, labels = chart.compute(t, cols, bucket)
            sent = chart.push(x, y, labels) or sent
        if sent:
            self.chart_updates += 1

    # -- no-widget frontends ---------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(data, tuple):  # (data, metadata)
            data = data[0]
        latest = self.sampler.latest
        data = dict(data)
        data["text/plain"] = snapshot_text(latest, self.history if latest else None)
        data["text/html"] = snapshot_html(latest, self.history if latest else None)
        return data

    def show(self) -> Any:
        """Display and remember the handle, so ``stop()`` can refresh the text fallback."""
        from IPython.display import display

        self._display_handle = display(self, display_id=True)
        return self._display_handle


def _short(path: str, keep: int = 28) -> str:
    return path if len(path) <= keep else "…" + path[-(keep - 1) :]


DASH_STYLE = """
.trainwatch { border: 1px solid var(--jp-border-color2); border-radius: 4px; padding: 6px;
  background: var(--jp-layout-color0);
  /* bqplot's own dark palette paints text orange; follow the JupyterLab theme instead */
  --bq-content-font-color: var(--jp-ui-font-color1);
  --bq-mainheading-fill: var(--jp-ui-font-color1);
  --bq-axislabel-fill: var(--jp-ui-font-color2);
  --bq-axis-tick-text-fill: var(--jp-ui-font-color2);
  --bq-axis-border-color: var(--jp-border-color1);
  --bq-grid-color: var(--jp-border-color2);
  --bq-plotarea-background-fill: var(--jp-layout-color0); }
.trainwatch .tw-status-pane { margin: 0 12px; }
.trainwatch .tw-chart .mainheading, .trainwatch .tw-chart text.mainheading {
  font-size: var(--jp-ui-font-size1); }
"""
