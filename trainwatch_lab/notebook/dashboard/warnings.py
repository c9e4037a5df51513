"""The warnings under the dashboard's Details: one line each, opened on demand.

Five warnings in full (message, fix, code) grew the output to 1,700 px. Each warning is now one
line (its severity icon and sentence, cut with an ellipsis, the whole sentence as tooltip);
its toggle opens the full message and fix below it. The rows are widgets kept per (code,
subject), so a warning a user opened stays open while its numbers change every tick (an HTML
``<details>`` would close each time the pane's HTML is replaced). Info notes stay one quiet
line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

from ...core.model import Alert
from ..warnings_html import SEVERITY_LABEL, esc, plain, prose_html, severity_icon
from .subshell import follow_frontend_subshell

NO_WARNINGS_HTML = '<div class="tw-muted tw-no-warnings">no warnings</div>'

WARNINGS_STYLE = """
.trainwatch .tw-warn-row { margin: 0; }
.trainwatch .tw-warn-row .widget-hbox { align-items: center; gap: 4px; }
.trainwatch .tw-warn-row .jupyter-button { width: 22px; height: 20px; padding: 0;
  margin: 0; background: transparent; }
.trainwatch .tw-warn-row .widget-hbox > .widget-html { margin: 0; min-width: 0;
  flex: 1 1 0; overflow: hidden; }
.trainwatch .tw-warn-row .widget-html-content { line-height: 20px; min-width: 0;
  overflow: hidden; }
.tw-warn-line { display: flex; align-items: center; gap: 6px; white-space: nowrap;
  overflow: hidden; min-width: 0; }
.tw-warn-line .tw-warn-text { flex: 1 1 auto; min-width: 0; overflow: hidden;
  text-overflow: ellipsis; }
.tw-warn-body { margin: 0 0 4px 26px; padding: 2px 8px; line-height: 1.4;
  border-left: 3px solid var(--jp-border-color1); white-space: normal; }
.tw-warn-body[data-severity="critical"] { border-left-color: var(--jp-error-color1); }
.tw-warn-body[data-severity="warning"] { border-left-color: var(--jp-warn-color1); }
.tw-warn-body code { color: var(--jp-ui-font-color2); }
"""


def warning_line_html(a: Alert) -> str:
    """The one line of a warning: icon, sentence (ellipsis), the sentence as tooltip."""
    return (
        f'<div class="tw-warn-line" data-code="{esc(a.code)}" data-severity="{esc(a.severity)}" '
        f'data-subject="{esc(a.subject)}" title="{esc(plain(a.message))}">'
        f'{severity_icon(a.severity)}<span class="tw-warn-text">{prose_html(a.message)}'
        "</span></div>"
    )


def warning_body_html(a: Alert) -> str:
    """What opening a warning shows: the whole message, the fix, the code."""
    return (
        f'<div class="tw-warn-body" data-severity="{esc(a.severity)}">'
        f"<b>{SEVERITY_LABEL[a.severity]}</b> {prose_html(a.message)}<br><b>Fix:</b> "
        f"{prose_html(a.fix)} "
        f"<code>{esc(a.code)}</code></div>"
    )


def notes_html(alerts: Sequence[Alert]) -> str:
    """Info notes as one quiet line each (no GPU... is said by the GPU line already)."""
    return "".join(
        f'<div class="tw-muted tw-note" data-code="{esc(a.code)}" title="{esc(plain(a.fix))}">'
        f"{prose_html(a.message)}</div>"
        for a in alerts
        if a.severity == "info" and a.code != "gpu-unavailable"
    )


class WarningRow(widgets.VBox):
    """One warning: a toggle and its line; the full text below while open."""

    def __init__(self, a: Alert) -> None:
        self.toggle = widgets.ToggleButton(
            value=False, icon="chevron-right", tooltip="Show the full message and its fix"
        )
        # made with their words: they travel with the widgets' creation, not as updates
        self.line = widgets.HTML(warning_line_html(a))
        self.body = widgets.HTML(warning_body_html(a), layout=widgets.Layout(display="none"))
        super().__init__(
            [widgets.HBox([self.toggle, self.line]), self.body], _dom_classes=("tw-warn-row",)
        )
        self.toggle.observe(self._on_toggle, names="value")
        follow_frontend_subshell(self.toggle)

    def _on_toggle(self, change: dict[str, Any]) -> None:
        open_ = bool(change["new"])
        self.toggle.icon = "chevron-down" if open_ else "chevron-right"
        self.body.layout.display = "block" if open_ else "none"

    def show(self, a: Alert) -> None:
        """Send only what changed (the line and the body are sent apart)."""
        line, body = warning_line_html(a), warning_body_html(a)
        if self.line.value != line:
            self.line.value = line
        if self.body.value != body:
            self.body.value = body


class WarningsPane(widgets.VBox):
    """The warnings of the latest sample, most severe first (the Advisor's order)."""

    def __init__(self) -> None:
        self.empty = widgets.HTML(NO_WARNINGS_HTML)
        self.notes = widgets.HTML("")
        self.rows: dict[tuple[str, str], WarningRow] = {}
        super().__init__([self.empty, self.notes])
        self.add_class("tw-alerts-pane")

    def update(self, alerts: Sequence[Alert]) -> None:
        serious = [a for a in alerts if a.severity != "info"]
        rows = {}
        for a in serious:
            row = self.rows.get(a.key)
            if row is None:
                row = WarningRow(a)
            else:
                row.show(a)
            rows[a.key] = row
        for key, row in self.rows.items():
            if key not in rows:
                row.close()
        self.rows = rows
        notes = notes_html(alerts)
        if self.notes.value != notes:
            self.notes.value = notes
        children = (*rows.values(), self.notes) if rows else (self.empty, self.notes)
        if self.children != children:
            self.children = children

    @property
    def html(self) -> str:
        """Everything the pane shows, as HTML (for tests and the text fallback)."""
        if not self.rows:
            return self.empty.value + self.notes.value
        parts = [r.line.value + r.body.value for r in self.rows.values()]
        return "".join(parts) + self.notes.value
