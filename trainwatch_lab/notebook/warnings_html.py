"""Warnings as text and HTML, and the one stylesheet of everything rendered without widgets.

Inline warnings, the dashboard's no-widget fallback and the ``%%trainwatch`` cell summary all
use these, so those frontends (nbconvert HTML, terminal IPython, a notebook opened untrusted)
never get nothing. Colours are JupyterLab CSS variables only, so light and dark themes both
read well.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.model import SEVERITY_RANK, Alert

SEVERITY_LABEL = {"critical": "CRITICAL", "warning": "WARNING", "info": "info"}
# JupyterLab's error icon (ui-components style/icons/error.svg: an exclamation mark) on a
# shape per severity, drawn inline: emoji such as U+26D4 render as a box where no colour emoji
# font is installed (Debian's Chromium), and an output's HTML cannot use LabIcon
_MARK = (
    '<circle cx="12" cy="{dot}" r="1.8" style="fill:{ink}"/>'
    '<path d="M10.4 {top}h3.2v{bar}h-3.2z" style="fill:{ink}"/>'
)
_SHAPES = {  # (shape, where the mark's dot is, where its bar starts, how long the bar is)
    "critical": ('<circle cx="12" cy="12" r="11" style="fill:{color}"/>', 17.5, 4.5, 9.5),
    "warning": ('<path d="M12 1 23.6 22.5H.4z" style="fill:{color}"/>', 19, 8.5, 7.5),
    "info": ('<circle cx="12" cy="12" r="11" style="fill:{color}"/>', 17.5, 4.5, 9.5),
}
SEVERITY_COLOR = {
    "critical": "var(--jp-error-color1)",
    "warning": "var(--jp-warn-color1)",
    "info": "var(--jp-info-color1)",
}
# The machine-readable part of an inline warning, kept as first shipped (``{"alerts": [...]}``):
# it is written into users' saved notebooks, so a reader of those may rely on it.
ALERT_MIME = "application/vnd.trainwatch.alert+json"

STYLE = """
.tw-root { font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1); }
.tw-root .tw-muted { color: var(--jp-ui-font-color2); }
.tw-root .tw-title { font-weight: 600; font-size: var(--jp-ui-font-size2); }
.tw-root table.tw-table { border-collapse: collapse; margin: 2px 0; table-layout: auto; }
.tw-root table.tw-table th, .tw-root table.tw-table td { padding: 2px 10px 2px 0;
  text-align: left; border: none; border-bottom: 1px solid var(--jp-border-color2);
  font-variant-numeric: tabular-nums; }
.tw-root table.tw-table th { color: var(--jp-ui-font-color2); font-weight: 600; }
.tw-root table.tw-table tr:nth-child(odd), .tw-root table.tw-table tr:hover {
  background: transparent; }
.tw-root .tw-alert { border-left: 4px solid var(--jp-border-color1); padding: 4px 8px;
  margin: 4px 0; background: var(--jp-layout-color2); color: var(--jp-ui-font-color1); }
.tw-root .tw-alert.tw-critical { border-left-color: var(--jp-error-color1); }
.tw-root .tw-alert.tw-warning { border-left-color: var(--jp-warn-color1); }
.tw-root .tw-alert.tw-info { border-left-color: var(--jp-info-color1); }
.tw-root .tw-kind-shared, .tw-root .tw-kind-unknown { color: var(--jp-warn-color1);
  font-weight: 600; }
.tw-root .tw-kind-local, .tw-root .tw-kind-memory, .tw-root .tw-kind-overlay {
  color: var(--jp-success-color1); }
.tw-root.tw-strip { font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size); color: var(--jp-ui-font-color1); }
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def prose_html(text: str) -> str:
    """A warning's sentence as HTML: what it quotes between backticks (a command, a line of
    Python) set as code, so a reader sees ``local_mirror(...)`` in code type, not in quotes
    of a markup they may not know. Plain-text surfaces (the terminal) keep the backticks."""
    return _CODE_SPAN.sub(lambda m: f"<code>{m.group(1)}</code>", esc(text))


def plain(text: str) -> str:
    """The sentence for a tooltip, which cannot hold markup: the backticks dropped."""
    return _CODE_SPAN.sub(lambda m: m.group(1), text)


def severity_icon(severity: str, size: int = 14) -> str:
    """A small inline SVG for ``severity`` in the theme's colour for it (no emoji font needed);
    colours in ``style``, where CSS variables work (not in SVG presentation attributes)."""
    shape, dot, top, bar = _SHAPES[severity]
    mark = _MARK.format(ink="var(--jp-layout-color0)", dot=dot, top=top, bar=bar)
    if severity == "info":  # an "i": the exclamation mark upside down
        mark = f'<g transform="rotate(180 12 12)">{mark}</g>'
    return (
        f'<svg class="tw-icon" data-severity="{esc(severity)}" width="{size}" height="{size}" '
        f'viewBox="0 0 24 24" role="img" aria-label="{esc(severity)}" '
        f'style="vertical-align:-2px;flex:none">{shape.format(color=SEVERITY_COLOR[severity])}'
        f"{mark}</svg>"
    )


# -- warnings ----------------------------------------------------------------------------


def alert_text(a: Alert) -> str:
    return f"{SEVERITY_LABEL[a.severity]} [{a.code}] {a.message}\n  Fix: {a.fix}"


def alert_attrs(a: Alert) -> str:
    """A warning block's class, data and inline style (it may be shown outside the widget)."""
    color = SEVERITY_COLOR[a.severity]
    return (
        f'class="tw-alert tw-{esc(a.severity)}" data-code="{esc(a.code)}" '
        f'data-severity="{esc(a.severity)}" style="border-left:4px solid {color};'
        "padding:4px 8px;margin:4px 0;background:var(--jp-layout-color2);"
        'color:var(--jp-ui-font-color1);font-family:var(--jp-ui-font-family)"'
    )


def alert_head_html(a: Alert) -> str:
    """``(!) CRITICAL disk-filling``: a warning block's first words."""
    return (
        f"<b>{severity_icon(a.severity)} {SEVERITY_LABEL[a.severity]}</b> "
        f'<code style="color:var(--jp-ui-font-color2)">{esc(a.code)}</code>'
    )


def alert_html(a: Alert) -> str:
    """One warning as a self-contained block: what it is, its sentence and its fix."""
    return (
        f"<div {alert_attrs(a)}>{alert_head_html(a)}<br>"
        f"{prose_html(a.message)}<br><b>Fix:</b> {prose_html(a.fix)}</div>"
    )


def alerts_bundle(alerts: Sequence[Alert], intro: str = "trainwatch") -> dict[str, Any]:
    """A display bundle (text/plain + text/html + a JSON copy for tests and tools)."""
    text = "\n".join(f"{intro}: {alert_text(a)}" for a in alerts)
    body = "".join(alert_html(a) for a in alerts)
    return {
        "text/plain": text,
        "text/html": f'<div class="tw-root tw-inline-alerts">{body}</div>',
        ALERT_MIME: {"alerts": [a.to_json() for a in alerts]},
    }


def sort_alerts(alerts: Iterable[Alert]) -> list[Alert]:
    return sorted(alerts, key=lambda a: (-SEVERITY_RANK[a.severity], a.code, a.subject))
