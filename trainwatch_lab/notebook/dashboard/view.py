"""The dashboard's HTML: the verdict header, the path table, the warnings, and its CSS.

Pure functions of a Sample, so the words are testable without widgets. The header takes
its verdict and facts from ``Sample.headline`` (advice/headline.py), the words the panel
and the status bar show too (the time the training loop lost to storage among them); nothing
here recomputes them. One line of our own: the fixes at work (``fixes_html``: each
``local_mirror`` in the words of ``%trainwatch status``, a checkpoint save in flight, the last
one's time).

The *stale* state is decided in the browser: the header carries a CSS animation that
shows "stale" after three sampling intervals, and every sample replaces the header's HTML,
which restarts the animation. When a cell holds the GIL in a long C call no sample can
arrive, no message restarts the clock, and the header turns stale by itself: no kernel
code has to run for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...advice.text import fill_text, fmt_duration, space_text
from ...core.history import History
from ...core.model import Alert, Headline, Sample
from ..warnings_html import esc
from .snapshot import latency_text, mount_text

WINDOW_CHOICES: tuple[tuple[str, float], ...] = (
    ("1 min", 60.0),
    ("5 min", 300.0),
    ("10 min", 600.0),
    ("30 min", 1800.0),
    ("1 h", 3600.0),
)


def window_label(seconds: float) -> str:
    """The window menu's words for ``seconds``; a duration's words when it is no choice."""
    for label, value in WINDOW_CHOICES:
        if value == seconds:
            return label
    return fmt_duration(seconds)


STALE_INTERVALS = 3
STALE_MIN_S = 1.5  # below this, websocket jitter alone would flicker the header

STATE_TEXT = {
    "live": "live",
    "paused": "charts paused",
    "waiting": "waiting for the first sample",
}


def clock(t: float | None) -> str:
    """24-hour local time of the kernel, as on every surface."""
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "—"


def headline_of(sample: Sample, history: History | None = None) -> Headline:
    """The sample's headline; a sampler without an Advisor (tests, a bare Sampler) gets the
    same function's words for its sample."""
    if sample.headline is not None:
        return sample.headline
    from ...advice.headline import headline

    return headline(sample, history=history)


@dataclass(frozen=True)
class HeaderState:
    """What the header shows besides the sample: the dashboard's own state."""

    state: str  # live | paused | waiting | anything else: stopped, with its reason
    samples: int
    points: int
    interval: float
    window: float
    paths: int = 0  # watched by this notebook: the scope of its verdict (the panel's: the machine)


def worst_warning(sample: Sample) -> Alert | None:
    """The warning the verdict line spells out: the most severe (the Advisor's order)."""
    return next((a for a in sample.warnings if a.severity != "info"), None)


def header_html(sample: Sample | None, st: HeaderState, history: History | None = None) -> str:
    """One line: the verdict (coloured by the worst severity) and the worst warning's
    sentence, the facts, the state and the scope; ``history``: for a sample without a
    headline (no Advisor), the time lost to storage.

    It travels to the browser every tick, so it is kept small (about 350 bytes, plus the
    worst warning's sentence while there is one): styled by data attributes, quoted with '
    (JSON escapes every "), but for ``data-state`` which tests and tools match as
    ``data-state="paused"``."""
    worst, serious = None, 0
    if sample is None:
        level, verdict, facts = "none", "trainwatch", ""
    else:
        h = headline_of(sample, history)
        level, verdict, facts = h.level, h.verdict, " · ".join(h.facts)
        worst = worst_warning(sample)
        serious = sum(a.severity != "info" for a in sample.warnings)
    timed = st.state in ("live", "paused")
    now = clock(sample.t if sample else None)
    if st.state in STATE_TEXT:
        label = STATE_TEXT[st.state] + (f" · {now}" if sample else "")
    else:
        label = st.state
    stale, style = "", ""
    if timed:
        stale = f"<span class='tw-stale'>stale · no sample since {now}</span>"
        seconds = max(STALE_INTERVALS * st.interval, STALE_MIN_S)
        style = f" style='--tw-stale-after:{seconds:g}s'"
    kind = "timed" if timed else ("stopped" if st.state not in STATE_TEXT else "waiting")
    said = (
        f"<span class='tw-worst' title='{esc(worst.message)}'>{esc(worst.message)}</span>"
        if worst
        else ""
    )
    scope = f"this notebook's {st.paths} path{'s' * (st.paths != 1)}" if st.paths else ""
    return (
        f"<div class='tw-head tw-status' data-state=\"{esc(st.state)}\" data-kind='{kind}' "
        f"data-level='{level}' data-warnings='{serious}' data-samples='{st.samples}' "
        f"data-points='{st.points}' data-window='{st.window:g}' "
        f"data-t='{sample.t if sample else ''}'{style}>"
        f"<b class='tw-verdict'>{esc(verdict)}</b>{said}"
        f"<span class='tw-state'><span class='tw-now'>{esc(label)}</span>{stale}</span>"
        f"<span class='tw-facts'>{esc(facts)}</span>"
        f"<span class='tw-scope'>{esc(scope)}</span></div>"
    )


def window_note(t: Any, window_s: float, bucket_s: float) -> str:
    """While the data is shorter than the window, the charts scale to the data: say so, so
    the window picked is visible ("12 s of 5 min"); nothing once the window is full."""
    if len(t) < 1:
        return ""
    have = float(t[-1] - t[0])
    if have >= window_s - max(bucket_s, 1.0):
        return ""
    return f"{fmt_duration(have)} of {window_label(window_s)}"


def paths_html(sample: Sample) -> str:
    """The watched paths, one row each: mount, write latency, free space, fill trend."""
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
        '<div class="tw-scroll"><table class="tw-table tw-paths"><tr><th>watched path</th>'
        "<th>mount</th><th>write latency</th><th>free space</th><th>trend</th></tr>"
        f"{''.join(rows)}</table></div>"
    )


MAX_MIRROR_LINES = 3  # the strip beside a running cell never grows past this


def save_text(st: Any, now: float | None = None) -> str | None:
    """A checkpoint save in flight and how long the last one took
    (fix.checkpoint.background.SaveStatus):
    ``saving ckpt-0003.pt in the background for 4 s · the last save took 12 s``."""
    if st is None:
        return None
    now = time.time() if now is None else now
    parts = []
    if st.in_flight:
        where = " in the background" if st.background else ""
        took = fmt_duration(max(0.0, now - (st.started_at or now)))
        name = os.path.basename(st.path or "") or "a checkpoint"
        parts.append(f"saving {name}{where} for {took}")
    if st.last_finished_at is not None and st.last_duration_s is not None:
        took = fmt_duration(st.last_duration_s)
        name = os.path.basename(st.last_path or "")
        if st.last_ok:
            parts.append(f"the last save ({name}, {clock(st.last_finished_at)}) took {took}")
        else:
            parts.append(f"the last save ({name}) failed after {took}: {st.last_error}")
    return " · ".join(parts) or None


def fixes_html(mirrors: Sequence[Any], save: Any, now: float | None = None) -> str:
    """The fixes at work, one quiet line each (at most MAX_MIRROR_LINES mirrors, then how many
    more); empty when there is none. Mirror lines are MirrorStatus.text(), the words of
    ``%trainwatch status`` and the panel."""
    lines = [
        f"<div class='tw-fix tw-mirror' data-state='{esc(m.state)}' title='{esc(t)}'>{esc(t)}</div>"
        for m, t in ((m, m.text()) for m in mirrors[:MAX_MIRROR_LINES])
    ]
    if len(mirrors) > MAX_MIRROR_LINES:
        more = len(mirrors) - MAX_MIRROR_LINES
        lines.append(f"<div class='tw-fix tw-muted'>and {more} more mirror{'s' * (more > 1)}</div>")
    text = save_text(save, now)
    if text:
        busy = "1" if save.in_flight else "0"
        lines.append(
            f"<div class='tw-fix tw-save' data-in-flight='{busy}' title='{esc(text)}'>"
            f"{esc(text)}</div>"
        )
    return "".join(lines)


NO_PATHS_HTML = (
    '<div class="tw-muted tw-no-paths">No watched path yet: add one with '
    "<code>%trainwatch PATH</code> or <code>.add_path(PATH)</code>.</div>"
)


DASH_STYLE = """
.trainwatch { border: 1px solid var(--jp-border-color2); border-radius: 4px;
  padding: 4px 8px 6px; background: var(--jp-layout-color0); box-sizing: border-box;
  /* bqplot's own dark palette paints text orange; follow the JupyterLab theme instead */
  --bq-content-font-color: var(--jp-ui-font-color1);
  --bq-mainheading-fill: var(--jp-ui-font-color1);
  --bq-axislabel-fill: var(--jp-ui-font-color1);
  --bq-axis-tick-text-fill: var(--jp-ui-font-color1);
  --bq-axis-border-color: var(--jp-border-color1);
  --bq-grid-color: var(--jp-border-color2);
  --bq-plotarea-background-fill: var(--jp-layout-color0); }
.trainwatch .tw-bar { gap: 6px; align-items: center; flex-wrap: wrap; }
/* the header wraps within its own box: never under the window, Pause and Details controls */
.trainwatch .tw-bar .widget-html { flex: 1 1 320px; min-width: 0; margin: 0; overflow: hidden; }
.trainwatch .tw-bar .widget-html-content { line-height: 1.4; white-space: normal; width: 100%;
  min-width: 0; }
.tw-head .tw-facts { min-width: 0; }
.trainwatch .tw-bar .jupyter-button, .trainwatch .tw-bar .widget-dropdown { margin: 0; }
.trainwatch .tw-bar .widget-dropdown > select { padding-right: 18px; }
.tw-head { display: flex; flex-wrap: wrap; align-items: center; gap: 2px 10px;
  --tw-level-color: var(--jp-border-color1); }
.tw-head[data-level="ok"] { --tw-level-color: var(--jp-success-color1); }
.tw-head[data-level="warning"] { --tw-level-color: var(--jp-warn-color1); }
.tw-head[data-level="critical"] { --tw-level-color: var(--jp-error-color1); }
.tw-head .tw-verdict { font-weight: 600; font-size: var(--jp-ui-font-size2);
  color: var(--jp-ui-font-color0); padding: 1px 10px 1px 8px; border-radius: 12px;
  border: 1px solid var(--tw-level-color); background: var(--jp-layout-color2);
  background: color-mix(in srgb, var(--tw-level-color) 16%, var(--jp-layout-color0));
  white-space: nowrap; }
.tw-head .tw-verdict::before { content: ""; display: inline-block; width: 8px; height: 8px;
  border-radius: 50%; background: var(--tw-level-color); margin: 0 6px 1px 0;
  vertical-align: middle; }
.tw-head .tw-facts { color: var(--jp-ui-font-color1); font-variant-numeric: tabular-nums; }
/* the worst warning's sentence under the verdict, whole in its tooltip: two lines at most,
   so that beside a file browser at 820 px (a 370 px dashboard) its numbers (rate, time to
   full: said first) are not under the ellipsis (issue 36) */
.tw-head .tw-worst { flex: 1 1 100%; order: 1; min-width: 0; overflow: hidden;
  display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2;
  overflow-wrap: anywhere; color: var(--jp-ui-font-color0); }
.tw-head .tw-scope { color: var(--jp-ui-font-color2); white-space: nowrap; }
.tw-head .tw-scope:empty { display: none; }
.tw-head .tw-state { display: inline-grid; white-space: nowrap;
  color: var(--jp-ui-font-color1); font-variant-numeric: tabular-nums; }
.tw-head .tw-state > span { grid-area: 1 / 1; justify-self: start; }
.tw-head .tw-stale { visibility: hidden; }
/* stale is decided here, in the browser: each sample replaces this HTML and restarts the
   clock; with no sample for three intervals the animation ends and "stale" shows */
.tw-head[data-kind="timed"] .tw-now {
  animation: tw-off 1ms linear var(--tw-stale-after) forwards; }
.tw-head[data-kind="timed"] .tw-stale {
  animation: tw-on 1ms linear var(--tw-stale-after) forwards; }
/* both ends given, linear, and opacity for the one going away: Chromium keeps a
   visibility animation towards "hidden" (or a step-end one) at its start value */
@keyframes tw-on { from { visibility: hidden; } to { visibility: visible; } }
@keyframes tw-off { from { opacity: 1; } to { opacity: 0; } }
.tw-head .tw-stale, .tw-head[data-state="paused"] .tw-now,
.tw-head[data-kind="stopped"] .tw-now { padding: 0 8px; border-radius: 10px;
  border: 1px solid var(--jp-border-color1); background: var(--jp-layout-color2);
  color: var(--jp-ui-font-color0); }
.tw-head .tw-stale { border-color: var(--jp-warn-color1); }
.trainwatch .tw-fixes .widget-html-content { line-height: 1.3; }
.tw-fix { color: var(--jp-ui-font-color1); font-size: var(--jp-ui-font-size1);
  display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2; overflow: hidden;
  overflow-wrap: anywhere; padding-left: 8px;
  border-left: 3px solid var(--jp-success-color1); margin: 1px 0; }
.tw-fix[data-state="copying"], .tw-fix[data-state="starting"],
.tw-fix[data-in-flight="1"] { border-left-color: var(--jp-info-color1); }
.tw-fix[data-state="share-unresponsive"] { border-left-color: var(--jp-warn-color1); }
.tw-fix[data-state="error"] { border-left-color: var(--jp-error-color1); }
.trainwatch .tw-charts { display: grid; gap: 4px 12px; margin-top: 4px;
  grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); }
.trainwatch .tw-chart { min-width: 0; justify-content: space-between; }
.trainwatch .tw-chart .widget-html { margin: 0; }
.trainwatch .tw-chart .widget-html-content { line-height: 18px; }
.tw-chart-head { display: flex; flex-wrap: wrap; gap: 0 10px; align-items: baseline;
  color: var(--jp-ui-font-color1); font-size: var(--jp-ui-font-size1); }
.tw-chart-head .tw-chart-title { font-weight: 600; }
.tw-chart-head .tw-chart-unit { color: var(--jp-ui-font-color1); margin-left: -6px; }
.tw-chart-head .tw-key { overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  max-width: 100%; }
.tw-chart-head .tw-key i { display: inline-block; width: 12px; height: 3px;
  vertical-align: middle; margin-right: 4px; border-radius: 1px; }
.trainwatch .tw-plot { margin: 0; }
.trainwatch .tw-plot path.line { stroke-linecap: round; stroke-linejoin: round; }
.trainwatch .tw-plot .axis .tick text { font-size: 11px; }
.trainwatch .tw-note-cell { display: flex; align-items: center; min-height: 60px;
  padding: 0 8px; border: 1px dashed var(--jp-border-color2); border-radius: 4px; }
.trainwatch .tw-details { border-top: 1px solid var(--jp-border-color2); margin-top: 4px;
  padding-top: 4px; }
.trainwatch .tw-scroll { overflow-x: auto; }
.trainwatch table.tw-paths { width: 100%; }
.trainwatch table.tw-paths td:first-child { word-break: break-all; min-width: 10em; }
.trainwatch .tw-details .tw-gpu-note, .trainwatch .tw-note { margin: 2px 0; }
"""
