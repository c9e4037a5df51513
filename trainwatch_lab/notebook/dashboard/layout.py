"""How the dashboard is laid out: the bar (verdict, window, Pause, Details), the chart row,
and what sits under Details. TrainWatch (dashboard.py) adds the behaviour.

The bar, a line per fix at work (a log mirror, a checkpoint save; none most of the time,
three mirrors at most) and the chart row are all a closed dashboard shows (at most ~420 px
beside the running cell with one path, ~480 px with three paths and two GPUs); the path table, the
warnings with their fixes, the latency and %util charts and the CSV export wait under
Details, whose charts are only made once it is opened.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ..warnings_html import STYLE
from .bqcharts import TimeChart
from .charts import COMPACT, DETAILED, make_chart
from .subshell import follow_frontend_subshell
from .view import DASH_STYLE, NO_PATHS_HTML, WINDOW_CHOICES, HeaderState, header_html, window_label
from .warnings import WARNINGS_STYLE, WarningsPane


class DashboardLayout(widgets.VBox):
    """The widgets of a dashboard; subclasses give the callbacks and the state."""

    window_s: float
    sampler: Any

    def _header_state(self) -> HeaderState:
        raise NotImplementedError

    def _on_window(self, change: dict[str, Any]) -> None:
        raise NotImplementedError

    def _on_pause(self, change: dict[str, Any]) -> None:
        raise NotImplementedError

    def _on_details(self, change: dict[str, Any]) -> None:
        raise NotImplementedError

    def export_csv(self) -> str:
        raise NotImplementedError

    def _build(self, details: bool) -> None:
        self.add_class("tw-root")
        self.add_class("trainwatch")
        self.style_html = widgets.HTML(f"<style>{STYLE}{DASH_STYLE}{WARNINGS_STYLE}</style>")
        self.status = widgets.HTML(header_html(None, self._header_state()))
        self.window_select = widgets.Dropdown(
            options=self._window_options(),
            value=self.window_s,
            tooltip="How much history the charts show",
            layout=widgets.Layout(width="92px"),
        )
        self.window_select.observe(self._on_window, names="value")
        self.pause_button = widgets.ToggleButton(
            value=False,
            description="Pause",
            icon="pause",
            tooltip="Freeze the charts (sampling and warnings go on)",
            layout=widgets.Layout(width="92px"),
        )
        self.pause_button.observe(self._on_pause, names="value")
        self.details_button = widgets.ToggleButton(
            value=details,
            description="Details",
            icon="chevron-up" if details else "chevron-down",
            tooltip="Watched paths, warnings with their fixes, latency and %util, CSV export",
            layout=widgets.Layout(width="96px"),
        )
        self.details_button.observe(self._on_details, names="value")
        bar = widgets.HBox(
            [self.status, self.window_select, self.pause_button, self.details_button]
        )
        bar.add_class("tw-bar")
        # the fixes at work (log mirrors, a checkpoint save): hidden while there is none
        self.fixes = widgets.HTML("", layout=widgets.Layout(display="none"))
        self.fixes.add_class("tw-fixes")
        self.charts: dict[str, TimeChart] = {name: make_chart(name) for name in COMPACT}
        self.space_note = widgets.HTML(NO_PATHS_HTML)
        self.space_note.add_class("tw-note-cell")
        # the chart row as the first sample will have it (a figure swapped in later is drawn
        # by bqplot before the page has placed it: SVG errors, translate(x,undefined))
        space = self.charts["space"].figure if self.paths() else self.space_note
        self.grid = widgets.GridBox([self.charts["io"].figure, space], layout=_grid())
        self.grid.add_class("tw-charts")
        self._build_details(details)
        self.children = [self.style_html, bar, self.fixes, self.grid, self.details]
        for control in (self.window_select, self.pause_button, self.details_button):
            follow_frontend_subshell(control)

    def _build_details(self, open_: bool) -> None:
        self.paths_pane = widgets.HTML(NO_PATHS_HTML)
        self.alerts_pane = WarningsPane()
        self.gpu_note = widgets.HTML(
            '<div class="tw-muted">GPU: waiting for the first sample</div>'
        )
        self.gpu_note.add_class("tw-gpu-note-pane")
        self.more_grid = widgets.GridBox([], layout=_grid())
        self.more_grid.add_class("tw-charts")
        self.export_button = widgets.Button(
            description="Export CSV",
            icon="download",
            tooltip="Write the whole history to a CSV file next to the notebook",
            layout=widgets.Layout(width="120px"),
        )
        self.export_button.on_click(lambda _b: self.export_csv())
        follow_frontend_subshell(self.export_button)
        self.export_status = widgets.HTML("")
        export = widgets.HBox(
            [self.export_button, self.export_status],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.details = widgets.VBox(
            [self.paths_pane, self.alerts_pane, self.gpu_note, self.more_grid, export],
            layout=widgets.Layout(display="flex" if open_ else "none"),
        )
        self.details.add_class("tw-details")
        if open_:
            self._make_detail_charts()

    def _make_detail_charts(self) -> None:
        """The charts under Details are made the first time they are opened (fewer widgets
        for the browser to build at ``%trainwatch``)."""
        for name in DETAILED:
            if name not in self.charts:
                self.charts[name] = make_chart(name)
        self.more_grid.children = tuple(self.charts[n].figure for n in DETAILED)

    def _window_options(self) -> list[tuple[str, float]]:
        capacity = self.sampler.history.capacity * self.sampler.interval
        options = [(label, s) for label, s in WINDOW_CHOICES if s <= capacity]
        if self.window_s not in [s for _, s in options]:
            options.append((window_label(self.window_s), self.window_s))
            options.sort(key=lambda o: o[1])
        return options

    @property
    def details_open(self) -> bool:
        return bool(self.details_button.value)


def _grid() -> widgets.Layout:
    """Charts side by side while each gets 300 px (three across a notebook beside the file
    browser at 1400 px), one under the other when narrower."""
    return widgets.Layout(grid_template_columns="repeat(auto-fit, minmax(300px, 1fr))")
