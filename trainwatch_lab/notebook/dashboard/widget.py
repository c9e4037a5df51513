"""The live dashboard: ``TrainWatch(paths=[...], interval=1.0)``, also what ``%trainwatch`` shows.

Compact by default, so it fits beside the running cell: one line with the verdict (from
``Sample.headline``, the words the panel and the status bar show) and the controls, then the
charts that answer "is my storage OK?" (GPU when there is one, disk MB/s, space used per
filesystem). Everything else (the path table, warnings with their fixes, latency and %util
charts, CSV export) sits under **Details**, opened on demand and remembered per notebook
(dashboard_prefs.py).

It subscribes to a Sampler and updates widget state from the sampler thread, so it keeps
moving while other cells run (widget state goes over comm messages, which ipykernel 6 and 7
both send from any thread). Each tick sends what changed and is in view: the header (about
1 KB on the wire), the charts once per bucket (charts.py), hidden panes only when what they
list changes. Frontends without widgets get a text/HTML snapshot from ``_repr_mimebundle_``;
``stop()`` refreshes that snapshot in the displayed output.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from ...core.defaults import DEFAULTS, Defaults
from ...core.gpu.select import as_selection
from ...core.history import SeriesKey, capacity_for
from ...core.model import Sample
from ...core.paths.names import normalise
from ...core.sampler import Sampler
from ..fix_status import mirror_statuses, save_status
from ..inline import InlineAlerts, attach
from ..settings import check_settings
from ..warnings_html import esc
from . import prefs, view
from .bqcharts import bucket_seconds, window_columns
from .charts import COMPACT, DETAILED, series_for
from .export import export_history
from .layout import DashboardLayout
from .snapshot import snapshot_html, snapshot_text
from .view import WINDOW_CHOICES as WINDOW_CHOICES
from .view import window_label as window_label

FIXES_EVERY_S = 2.0


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
    included); history long enough for the largest window anyone can pick. In a kernel its
    Jupyter server started, that is the server's one sampler (core.attach: the server's
    probes and GPUs) when ``interval`` is the server's and ``probe`` is not refused where
    the server probes; elsewhere (VS Code, plain IPython) one in this kernel."""
    from ...core.attach.link import shared_link
    from ...monitor import make_attached_sampler, make_sampler

    keep_s = max(window_s, defaults.history_s)
    link = shared_link()
    if link is not None and not link.serves(interval, probe):
        link.release_unused()  # asked for another interval, or no probes: sample here
        link = None
    if link is not None:
        return make_attached_sampler(
            link,
            [normalise(p) for p in paths],
            pid=os.getpid(),
            defaults=defaults,
            history_capacity=capacity_for(keep_s, link.interval),
        )
    return make_sampler(
        [normalise(p) for p in paths],
        pid=os.getpid(),
        interval=interval,
        probe=probe,
        gpu=gpu,
        defaults=defaults,
        history_capacity=capacity_for(keep_s, interval),
    )


class TrainWatch(DashboardLayout):
    """Storage and GPU next to the running cell, as one widget.

    ``paths``: directories to watch (log dir, checkpoint dir, data dir); more can be added
    with ``add_path``. ``gpus``: restrict GPU charts to these CUDA indices (None: all).
    ``sampler``: share an existing Sampler (then ``stop()`` leaves it running).
    ``inline``: also show new warnings under the running cell (an InlineAlerts to share).
    ``details``: open the details; None: as last left in this notebook (closed at first).
    ``since``: replay the machine's recorded history from then instead (seconds ago, "8h",
    "03:00", an ISO time or a datetime; ``until`` ends it, default now): what
    ``%trainwatch --since`` shows, a ``Replay`` (notebook/dashboard/replay.py); None: live.
    """

    def __new__(cls, *args: Any, since: Any = None, until: Any = None, **kwargs: Any) -> Any:
        if since is None and until is None:
            return super().__new__(cls, *args, **kwargs)
        if args or kwargs:  # a replay reads the record: nothing of a live dashboard applies
            given = ", ".join([*(["paths"] if args else []), *kwargs])
            raise TypeError(f"TrainWatch(since=...) replays the recorded history; drop {given}")
        from .replay import Replay

        return Replay(since, until)  # not a TrainWatch: __init__ is not called on it

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
        interval: float = DEFAULTS.interval_s,
        *,
        window: float = DEFAULTS.window_s,
        probe: bool = True,
        gpus: Sequence[int | str] | None = None,
        gpu: bool = True,
        sampler: Sampler | None = None,
        inline: bool | InlineAlerts = True,
        defaults: Defaults = DEFAULTS,
        start: bool = True,
        details: bool | None = None,
        since: None = None,  # (a replay is made by __new__)
        until: None = None,
    ) -> None:
        if sampler is not None:  # a shared sampler ticks at its own pace
            interval = sampler.interval
        keys, interval, window = check_settings(paths, interval, window)
        # 0, not None: the browser then counts its views of the dashboard (``_on_views``)
        super().__init__(_view_count=0)
        self._views_seen = False
        self._was_unseen = False  # at the last sample: drawn nothing, to catch up when seen
        self.defaults = defaults
        self.gpu_filter = as_selection(gpus)  # indices, GPU or MIG UUIDs
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
        self._stop_reason = "stopped"
        self._lock = threading.RLock()
        self._last_chart_t = -math.inf
        self._fixes_t = -math.inf
        self._pane_key: Any = None
        self._display_handle: Any = None
        self._unsubscribe: Any = None
        self._inline = None
        if details is None:
            details = bool(prefs.load().get("details", False))
        self._build(details)
        if inline:
            self._attach_inline(inline)
        self.observe(self._on_views, names="_view_count")
        if start:
            self.start()

    # -- lifecycle -------------------------------------------------------------------
    def start(self, run_sampler: bool = True) -> TrainWatch:
        """Subscribe and start sampling; ``run_sampler=False`` only subscribes (for a sampler
        someone else ticks, e.g. ``sampler.tick()`` from a training loop)."""
        with self._lock:
            if self._unsubscribe is None:
                self._unsubscribe = self.sampler.subscribe(self._on_sample)
            self.stopped = False
            self.window_select.disabled = self.pause_button.disabled = False
        if run_sampler:
            self.sampler.start()
        return self

    def stop(self, reason: str = "stopped") -> None:
        """Stop updating (and sampling, when this widget owns its sampler); keeps the charts.
        Pause and the window are disabled: they would change nothing any more."""
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
            self.window_select.disabled = self.pause_button.disabled = True
            self.status.value = self._header_html(self.sampler.latest)
        if self._display_handle is not None:
            with contextlib.suppress(Exception):
                self._display_handle.update(self)

    def close(self) -> None:
        if getattr(self, "_lock", None) is None:  # __init__ refused its arguments: nothing built
            return
        self.stop()
        for chart in self.charts.values():
            chart.close()
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

    # -- inline warnings -------------------------------------------------------------
    _inline_unsub: Any = None

    def _attach_inline(self, inline: bool | InlineAlerts) -> None:
        """Warnings that start while a cell runs also go under that cell (inline.py)."""
        if not isinstance(inline, InlineAlerts):
            inline = attach()
        if inline is not None:
            self._inline = inline
            self._inline_unsub = self.sampler.subscribe(inline.on_sample)

    # -- controls (the comm thread: a kernel subshell while a cell runs) --------------
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
                self.status.value = self._header_html(self.sampler.latest)

    def _on_details(self, change: dict[str, Any]) -> None:
        open_ = bool(change["new"])
        with self._lock:
            self.details_button.icon = "chevron-up" if open_ else "chevron-down"
            # shown before its charts are made: bqplot sizes a chart when it is first drawn,
            # and one drawn in a hidden box is 0 px wide (negative SVG rects in the console)
            self.details.layout.display = "flex" if open_ else "none"
            if open_:
                self._make_detail_charts()
                # drawn from the history at once, also on a stopped dashboard: no more
                # samples will come to draw them (empty charts with no axes, issue 23)
                self._refresh(force=True)
        prefs.save({"details": open_})

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
        slow one, or a share that stopped answering. The outcome shows beside the button;
        ``wait=True`` also raises ExportError (one line) when the file was not written.
        """
        return export_history(self.history, self.export_status, path, wait, timeout)

    # -- who sees it (the comm thread) ------------------------------------------------
    @property
    def unseen(self) -> bool:
        """Nobody can see it: shown, and no view of it is left (its output cleared, its
        notebook closed), or no browser is connected to this kernel at all (a closed tab
        removes no view; the Jupyter server tells an attached kernel, ``HubLink.clients``).

        Why it matters: each tick of a dashboard nobody sees still costs the kernel its
        charts' arithmetic and the comm its bytes, which the Jupyter server keeps for a
        browser that is not there, in a list with no bound. A dashboard never shown (a
        test, a frontend without widgets) is not unseen unless the server says no browser
        is there: nothing else says where it is read."""
        if self._views_seen and not self._view_count:
            return True
        link = getattr(self.sampler.find_source("paths"), "link", None)
        return getattr(link, "clients", None) == 0

    def _on_views(self, change: dict[str, Any]) -> None:
        """The browser made or removed a view; a first view after none catches up at once
        (the charts and header as of now, not as of when the last view went)."""
        with self._lock:
            if not change["new"]:
                return
            self._views_seen = True
            latest = self.sampler.latest
            if self._was_unseen and not self.unseen and not self.stopped and latest is not None:
                self._was_unseen = False
                self._draw(latest, force=True)

    # -- updates (sampler thread) ----------------------------------------------------
    def _on_sample(self, sample: Sample) -> None:
        with self._lock:
            self.samples += 1
            if self.stopped:
                return
            unseen = self.unseen
            woke, self._was_unseen = self._was_unseen and not unseen, unseen
            if not unseen:
                self._draw(sample, force=woke)  # seen again: as of now, at once

    def _draw(self, sample: Sample, force: bool = False) -> None:
        if self.paused:  # charts hold still; the verdict and warnings go on
            self._update_panes(sample, force)
            self.status.value = self._header_html(sample)
            return
        self._refresh(sample, force)

    def refresh(self) -> None:
        """Redraw now from the history (e.g. after a test ticked the sampler by hand)."""
        with self._lock:
            self._refresh(force=True)

    def _refresh(self, sample: Sample | None = None, force: bool = False) -> None:
        sample = sample or self.sampler.latest
        if sample is None:
            return
        self._update_panes(sample, force)
        self._update_fixes(sample.t)
        # while the data is shorter than the window there is nothing to downsample: draw
        # every tick, so the first point shows with the first sample
        span = max(len(self.history), 1) * self.sampler.interval
        bucket = bucket_seconds(min(self.window_s, span), self.sampler.interval)
        if sample.t < self._last_chart_t:  # the clock went back: redraw from scratch
            self._last_chart_t = -math.inf
        if force or sample.t - self._last_chart_t >= bucket - 1e-6:
            self._last_chart_t = sample.t
            self._update_charts(sample, bucket)
        self.status.value = self._header_html(sample)

    def _header_state(self) -> view.HeaderState:
        if self.stopped:
            state = self._stop_reason
        elif self.paused:
            state = "paused"
        else:
            state = "live" if self.samples else "waiting"
        points = self.charts["io"].points if hasattr(self, "charts") else 0
        return view.HeaderState(
            state, self.samples, points, self.sampler.interval, self.window_s, len(self.paths())
        )

    def _header_html(self, sample: Sample | None) -> str:
        return view.header_html(sample, self._header_state(), self.history)

    def _update_fixes(self, now: float) -> None:
        """The mirrors' and checkpoint saves' lines, every FIXES_EVERY_S (a mirror's status
        scans its local directory); sent only when the words changed."""
        if abs(now - self._fixes_t) < FIXES_EVERY_S:
            return
        self._fixes_t = now
        html = view.fixes_html(mirror_statuses(), save_status())
        if html != self.fixes.value:
            self.fixes.value = html
            self.fixes.layout.display = "block" if html else "none"

    def _gpus(self, sample: Sample) -> list[Any]:
        return [g for g in sample.gpus if self.gpu_filter is None or g in self.gpu_filter]

    def _gpu_reason(self, sample: Sample) -> str | None:
        """Why there is no GPU chart (None: there is one)."""
        if self._gpus(sample):
            return None
        if not self.gpu_enabled:
            return "GPU monitoring is off."
        if sample.gpus and self.gpu_filter is not None:
            return f"none of the GPUs {', '.join(map(str, self.gpu_filter))} is present."
        return sample.notes.get("gpus", "no GPU reported.")

    def _update_panes(self, sample: Sample, force: bool = False) -> None:
        """The chart row's make-up every tick (only sent when it changes); the panes under
        Details every tick while open, and while closed only when what they list changes,
        so a closed dashboard sends the header alone."""
        reason = self._gpu_reason(sample)
        gpu = () if reason else (self.charts["gpu"].figure,)
        space = self.charts["space"].figure if sample.paths else self.space_note
        cells = (*gpu, self.charts["io"].figure, space)
        if self.grid.children != cells:
            self.grid.children = cells
        key = (
            tuple((p, s.kind, s.exists) for p, s in sorted(sample.paths.items())),
            tuple((a.code, a.subject, a.severity) for a in sample.warnings),
            reason,
        )
        if not (force or self.details_open or key != self._pane_key):
            return
        self._pane_key = key
        self.paths_pane.value = view.paths_html(sample) if sample.paths else view.NO_PATHS_HTML
        self.alerts_pane.update(sample.warnings)
        self.gpu_note.value = (
            f'<div class="tw-gpu-note tw-muted">GPU: {esc(reason)}</div>' if reason else ""
        )

    def _update_charts(self, sample: Sample, bucket: float) -> None:
        """Feed the charts in view: the compact row, and those under Details when open."""
        names = [n for n in COMPACT if self.charts[n].figure in self.grid.children]
        if self.details_open:
            names += [n for n in DETAILED if n in self.charts]
        gpus = self._gpus(sample)
        for name in names:
            self.charts[name].set_series(series_for(name, sample, gpus, self.history))
        keys: list[SeriesKey] = [k for n in names for k in self.charts[n].series_keys()]
        t, cols = window_columns(self.history, keys, self.window_s, now=sample.t)
        note = view.window_note(t, self.window_s, bucket)
        sent = False
        for name in names:
            chart = self.charts[name]
            x, y, labels = chart.compute(t, cols, bucket)
            sent = chart.push(x, y, labels, note=note) or sent
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
