"""Plain text and HTML renderings: inline alerts, the dashboard's no-widget fallback, the
``%%trainwatch`` cell summary.

Everything a user can read without widgets (nbconvert HTML, terminal IPython, a notebook
opened untrusted) comes from here, so those frontends never get nothing. Colours are
JupyterLab CSS variables only, so light and dark themes both read well; numbers go through
advice.text so every surface formats them the same way.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ..advice.text import fill_text, fmt_bytes, fmt_duration, fmt_ms, fmt_pct, fmt_rate
from ..core.defaults import DEFAULTS, MIB, Defaults
from ..core.fill import FilesystemKey, filesystem_key
from ..core.history import History
from ..core.model import SEVERITY_RANK, Alert, PathState, Sample, watched_devices

SEVERITY_LABEL = {"critical": "CRITICAL", "warning": "WARNING", "info": "info"}
SEVERITY_ICON = {"critical": "⛔", "warning": "⚠️", "info": "ℹ️"}
SEVERITY_COLOR = {
    "critical": "var(--jp-error-color1)",
    "warning": "var(--jp-warn-color1)",
    "info": "var(--jp-info-color1)",
}
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


# -- alerts ------------------------------------------------------------------------------


def alert_text(a: Alert) -> str:
    return f"{SEVERITY_LABEL[a.severity]} [{a.code}] {a.message}\n  Fix: {a.fix}"


def alert_html(a: Alert) -> str:
    """One alert as a self-contained block (inline styles: it may be shown outside the widget)."""
    color = SEVERITY_COLOR[a.severity]
    return (
        f'<div class="tw-alert tw-{esc(a.severity)}" data-code="{esc(a.code)}" '
        f'data-severity="{esc(a.severity)}" style="border-left:4px solid {color};'
        "padding:4px 8px;margin:4px 0;background:var(--jp-layout-color2);"
        'color:var(--jp-ui-font-color1);font-family:var(--jp-ui-font-family)">'
        f"<b>{SEVERITY_ICON[a.severity]} {SEVERITY_LABEL[a.severity]}</b> "
        f'<code style="color:var(--jp-ui-font-color2)">{esc(a.code)}</code><br>'
        f"{esc(a.message)}<br><b>Fix:</b> {esc(a.fix)}</div>"
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


# -- paths -------------------------------------------------------------------------------


def mount_text(p: PathState) -> str:
    """``shared (fuse.sshfs from u@h:/x at /mnt/x)``."""
    if not p.responsive:
        return "not answering"
    where = p.fstype or "?"
    if p.source:
        where += f" from {p.source}"
    if p.mountpoint:
        where += f" at {p.mountpoint}"
    return f"{p.kind} ({where})"


def latency_text(p: PathState) -> str:
    if p.probe is None:
        return "write latency: not measured yet"
    if p.probe.p50_ms is None:
        return f"write latency: {p.probe.error or 'no measurement'}"
    return f"write+fsync p50 {fmt_ms(p.probe.p50_ms)}, p99 {fmt_ms(p.probe.p99_ms)}"


def space_text(p: PathState) -> str:
    if p.avail_bytes is None or not p.total_bytes:
        return "free space: ?"
    return (
        f"{fmt_bytes(p.avail_bytes)} free of {fmt_bytes(p.total_bytes)} "
        f"({fmt_pct(p.avail_bytes / p.total_bytes)})"
    )


# -- the dashboard snapshot (no-widget fallback) -----------------------------------------


def snapshot_text(sample: Sample | None, history: History | None = None) -> str:
    if sample is None:
        return "trainwatch: waiting for the first sample"
    lines = [f"trainwatch at {_clock(sample.t)}"]
    for path, p in sorted(sample.paths.items()):
        lines.append(f"  {path}: {mount_text(p)}; {latency_text(p)}; {space_text(p)}")
        if history is not None:
            lines.append(f"    {fill_text(p.fill)}")
    for name in watched_devices(sample):
        d = sample.disks.get(name)
        if d is not None:
            lines.append(
                f"  disk {name}: read {fmt_rate(d.rmb_s * MIB)}, write {fmt_rate(d.wmb_s * MIB)}, "
                f"await {fmt_ms(max(d.r_await, d.w_await))}, util {d.util:.0f} %"
            )
    if sample.gpus:
        for g in sample.gpus:
            lines.append(f"  GPU {g.index} {g.name}: util {_pct(g.util_pct)}, mem {_gpu_mem(g)}")
    elif "gpus" in sample.notes:
        lines.append(f"  GPU: {sample.notes['gpus']}")
    if sample.warnings:
        lines.extend(alert_text(a) for a in sample.warnings)
    else:
        lines.append("  no warnings")
    return "\n".join(lines)


def snapshot_html(sample: Sample | None, history: History | None = None) -> str:
    if sample is None:
        return '<div class="tw-root tw-muted">trainwatch: waiting for the first sample</div>'
    rows = []
    for path, p in sorted(sample.paths.items()):
        fill = fill_text(p.fill) if history is not None else ""
        rows.append(
            f"<tr><td><code>{esc(path)}</code></td>"
            f'<td class="tw-kind-{esc(p.kind)}">{esc(mount_text(p))}</td>'
            f"<td>{esc(latency_text(p))}</td><td>{esc(space_text(p))}</td>"
            f"<td>{esc(fill)}</td></tr>"
        )
    disk_rows = []
    for name in watched_devices(sample):
        d = sample.disks.get(name)
        if d is not None:
            disk_rows.append(
                f"<tr><td>{esc(name)}</td><td>{esc(fmt_rate(d.rmb_s * MIB))}</td>"
                f"<td>{esc(fmt_rate(d.wmb_s * MIB))}</td>"
                f"<td>{esc(fmt_ms(max(d.r_await, d.w_await)))}</td><td>{d.util:.0f} %</td></tr>"
            )
    gpu = (
        "".join(
            f"<tr><td>GPU {g.index}</td><td>{esc(g.name)}</td><td>{esc(_pct(g.util_pct))}</td>"
            f"<td>{esc(_gpu_mem(g))}</td></tr>"
            for g in sample.gpus
        )
        if sample.gpus
        else f'<tr><td class="tw-muted">{esc(sample.notes.get("gpus", "no GPU data"))}</td></tr>'
    )
    warnings = "".join(alert_html(a) for a in sample.warnings) or (
        '<div class="tw-muted">no warnings</div>'
    )
    return (
        f'<div class="tw-root"><style>{STYLE}</style>'
        f'<div class="tw-title">trainwatch at {esc(_clock(sample.t))}</div>'
        '<table class="tw-table"><tr><th>path</th><th>mount</th><th>latency</th>'
        f"<th>space</th><th>trend</th></tr>{''.join(rows)}</table>"
        '<table class="tw-table"><tr><th>disk</th><th>read</th><th>write</th><th>await</th>'
        f"<th>util</th></tr>{''.join(disk_rows)}</table>"
        f'<table class="tw-table">{gpu}</table>{warnings}</div>'
    )


def _clock(t: float) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(t))


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} %"


def _gpu_mem(g: Any) -> str:
    if g.mem_used_bytes is None:
        return "?"
    return f"{fmt_bytes(g.mem_used_bytes)} of {fmt_bytes(g.mem_total_bytes)}"


# -- the %%trainwatch cell summary -------------------------------------------------------

# Rates are integrated over the samples' own times while each source divides by its own
# clock, so two totals of the same bytes (this kernel's, its disk's) agree only to a few
# percent: a shortfall under this fraction is not reported as data left in the page cache.
SETTLED_FRACTION = 0.05
# where write() calls go that give a local disk nothing new to write
OTHER_WRITES = "network or FUSE filesystems, tmpfs, pipes, pages it had dirtied already"


@dataclass
class DeviceSummary:
    device: str
    peak_read_bps: float
    peak_write_bps: float
    peak_await_ms: float
    written_bytes: float  # what the block device wrote during the cell, every process


@dataclass
class GpuSummary:
    index: str
    mean_util_pct: float
    idle_s: float


@dataclass
class FilesystemSummary:
    """One filesystem (mountpoint and size, as disk-filling groups them) and the watched
    paths on it: they share these numbers, so they share one row."""

    paths: list[str]
    filesystem: str | None  # its mountpoint
    used_growth_bytes: float | None  # growth of used space on that filesystem during the cell
    device: str | None
    written_bytes: float | None  # written to its block device by every process, during the cell


@dataclass
class WaitSummary:
    """Time the watched process lost to one watched path during the cell (core.waits)."""

    path: str
    side: str  # "main": the training loop's thread; "workers": its worker processes
    fraction: float  # of the measured time
    seconds: float  # measured
    call: str | None  # the system call most of it went to


@dataclass
class CellSummary:
    """What a ``%%trainwatch`` cell did to storage and GPU, from the History of its run."""

    seconds: float
    samples: int
    devices: list[DeviceSummary] = field(default_factory=list)
    gpus: list[GpuSummary] = field(default_factory=list)
    filesystems: list[FilesystemSummary] = field(default_factory=list)
    warnings: list[Alert] = field(default_factory=list)
    gpu_note: str | None = None
    process_write_bytes: float | None = None  # this kernel and its children: pages dirtied
    process_write_chars: float | None = None  # ... every write() call (network/FUSE included)
    waits: list[WaitSummary] | None = None  # None: not measured (no watched process)

    def samples_text(self) -> str:
        if not self.samples:
            return "no sample: the sampler did not answer in time"
        return f"{self.samples} sample{'s' if self.samples != 1 else ''}"

    def to_text(self) -> str:
        lines = [f"trainwatch: cell ran {fmt_duration(self.seconds)} ({self.samples_text()})"]
        lines += [f"  disk {d.device}: {_device_text(d)}" for d in self.devices]
        for g in self.gpus:
            lines.append(
                f"  GPU {g.index}: mean util {g.mean_util_pct:.0f} %, idle {fmt_duration(g.idle_s)}"
            )
        if not self.gpus and self.gpu_note:
            lines.append(f"  GPU: {self.gpu_note}")
        lines += [f"  {', '.join(f.paths)}: {_filesystem_text(f)}" for f in self.filesystems]
        proc = _process_text(self)
        if proc:
            lines.append(f"  {proc}")
        lines += [f"  {line}" for line in self.waits_lines()]
        lines += ["  " + alert_text(a) for a in self.warnings] or ["  no warnings raised"]
        return "\n".join(lines)

    def waits_lines(self) -> list[str]:
        """``this cell spent 31 % of 42 s waiting on /mnt/share/runs, mostly fsync``."""
        if self.waits is None:
            return []
        cell = fmt_duration(self.seconds)
        shown = [w for w in self.waits if w.fraction >= WAIT_SHOWN]
        if not shown:
            return [f"this cell spent no measurable time waiting on the watched paths ({cell})"]
        lines = []
        for w in shown:
            who = "this cell" if w.side == "main" else "its worker processes"
            text = f"{who} spent {fmt_pct(w.fraction)} of {cell} waiting on {w.path}"
            lines.append(text + (f", mostly {w.call}" if w.call else ""))
        return lines

    def to_html(self) -> str:
        dev = "".join(
            f"<tr><td>{esc(d.device)}</td><td>{esc(fmt_bytes(d.written_bytes))}</td>"
            f"<td>{esc(fmt_rate(d.peak_read_bps))}</td><td>{esc(fmt_rate(d.peak_write_bps))}</td>"
            f"<td>{esc(fmt_ms(d.peak_await_ms))}</td></tr>"
            for d in self.devices
        )
        gpu = "".join(
            f"<tr><td>GPU {esc(g.index)}</td><td>{g.mean_util_pct:.0f} %</td>"
            f"<td>{esc(fmt_duration(g.idle_s))}</td></tr>"
            for g in self.gpus
        )
        if not gpu:
            gpu = f'<tr><td colspan="3" class="tw-muted">{esc(self.gpu_note or "no GPU")}</td></tr>'
        paths = "".join(
            f"<tr><td>{'<br>'.join(f'<code>{esc(p)}</code>' for p in f.paths)}</td>"
            f"<td>{esc(_filesystem_text(f))}</td></tr>"
            for f in self.filesystems
        )
        proc = _process_text(self)
        if proc:
            paths += f'<tr><td class="tw-muted">this kernel</td><td>{esc(proc)}</td></tr>'
        waits = "".join(f'<div class="tw-waits">{esc(line)}</div>' for line in self.waits_lines())
        warnings = "".join(alert_html(a) for a in self.warnings) or (
            '<div class="tw-muted">no warnings raised</div>'
        )
        return (
            f'<div class="tw-root tw-cell-summary" data-samples="{self.samples}">'
            f"<style>{STYLE}</style>"
            f'<div class="tw-title">trainwatch: cell ran {esc(fmt_duration(self.seconds))} '
            f'<span class="tw-muted">({esc(self.samples_text())})</span></div>'
            '<table class="tw-table"><tr><th>disk</th><th>written (all processes)</th>'
            f"<th>peak read</th><th>peak write</th><th>peak await</th></tr>{dev}</table>"
            '<table class="tw-table"><tr><th>GPU</th><th>mean util</th><th>idle</th></tr>'
            f"{gpu}</table>"
            '<table class="tw-table"><tr><th>watched paths</th><th>written</th></tr>'
            f"{paths}</table>{waits}{warnings}</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.to_text(), "text/html": self.to_html()}


def _device_text(d: DeviceSummary) -> str:
    return (
        f"{fmt_bytes(d.written_bytes)} written during the cell (all processes); "
        f"peak read {fmt_rate(d.peak_read_bps)}, peak write {fmt_rate(d.peak_write_bps)}, "
        f"peak await {fmt_ms(d.peak_await_ms)}"
    )


def _filesystem_text(f: FilesystemSummary) -> str:
    parts = []
    where = f" on {f.filesystem}" if f.filesystem else ""
    if f.used_growth_bytes is not None:
        sign = "+" if f.used_growth_bytes >= 0 else ""
        parts.append(f"space used{where} {sign}{fmt_bytes(f.used_growth_bytes)}")
    if f.device is not None and f.written_bytes is not None:
        parts.append(f"{fmt_bytes(f.written_bytes)} written to {f.device} (all processes)")
    return "; ".join(parts) or "no data"


def _process_text(s: CellSummary) -> str | None:
    """What this kernel wrote, and how much of it its disks have written since.

    /proc/PID/io counts ``write_bytes`` when a page is dirtied, not when it reaches the
    disk, so "reached the disk" comes from the block devices' own counters over the same
    samples; what they have not written yet is still in the page cache. ``write_chars``
    beyond ``write_bytes`` gave no local disk anything new to write (OTHER_WRITES).
    """
    chars, dirtied = s.process_write_chars, s.process_write_bytes
    if chars is None and dirtied is None:
        return None
    text = f"this kernel wrote {fmt_bytes(chars if chars is not None else dirtied)}"
    other = (chars or 0.0) - (dirtied or 0.0)
    if not dirtied:
        return text + (f" (no new data for a local disk: {OTHER_WRITES})" if chars else "")
    if other > SETTLED_FRACTION * (chars or 0.0):
        text += f" ({fmt_bytes(other)} of it no new data for a local disk: {OTHER_WRITES})"
    if not s.devices:
        return text + "; no disk statistics to tell whether it reached the disk"
    landed = sum(d.written_bytes for d in s.devices)
    pending = dirtied - landed
    if pending <= SETTLED_FRACTION * dirtied:
        whole_pages = chars is not None and -other > SETTLED_FRACTION * dirtied
        pages = " (counted in whole pages)" if whole_pages else ""
        return text + f"; {fmt_bytes(dirtied)} reached the disk{pages}"
    cached = f"{fmt_bytes(pending)} still in the page cache (not yet on disk)"
    if landed <= SETTLED_FRACTION * dirtied:
        return f"{text}; {cached}"
    return f"{text}; {fmt_bytes(landed)} reached the disk, {cached}"


def _finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


@dataclass
class _Window:
    """The samples one cell owns: ``start < t <= end``, plus the last one at or before
    ``start``, the baseline a counter's first interval is measured from. Nothing earlier:
    a previous cell's samples never reach this cell's summary."""

    history: History
    times: list[float]  # the baseline (when there is one), then the cell's own samples
    inside: list[float]  # the cell's own samples

    @classmethod
    def of(cls, history: History, start: float, end: float) -> _Window:
        times = [t for t in history.times() if t <= end]
        inside = [t for t in times if t > start]
        before = len(times) - len(inside)
        return cls(history, times[before - 1 : before] + inside if before else inside, inside)

    def values(self, kind: str, name: str, fld: str) -> dict[float, float]:
        """One series at this window's sample times (missing where it had no value)."""
        if not self.times:
            return {}
        since = math.nextafter(self.times[0], -math.inf)
        ts, vs = self.history.series(kind, name, fld, since=since)
        end = self.times[-1]
        return {t: v for t, v in zip(ts, vs, strict=True) if t <= end and math.isfinite(v)}

    def peak(self, kind: str, name: str, fld: str) -> float | None:
        vals = self.values(kind, name, fld)
        return max((vals[t] for t in self.inside if t in vals), default=None)

    def total(self, kind: str, name: str, fld: str) -> float | None:
        """Integral of a rate: each value covers the time since the sample before it (the
        window's, not the series': a device seen from its second reading on still covers
        the interval that began at the first). None when no sample of the cell has it."""
        vals = self.values(kind, name, fld)
        if not any(t in vals for t in self.inside):
            return None
        return sum(vals[t] * (t - prev) for prev, t in pairwise(self.times) if t in vals)

    def change(self, kind: str, name: str, fld: str) -> tuple[float, float] | None:
        """First and last value of a level in the window (the baseline counts as first)."""
        vals = self.values(kind, name, fld)
        if len(vals) < 2 or not any(t in vals for t in self.inside):
            return None
        ordered = [vals[t] for t in sorted(vals)]
        return ordered[0], ordered[-1]


def _device_rows(window: _Window, devices: Iterable[str]) -> list[DeviceSummary]:
    rows = []
    for dev in devices:
        written = window.total("disk", dev, "wmb_s")
        if written is None:
            continue
        awaits = _finite([window.peak("disk", dev, "r_await"), window.peak("disk", dev, "w_await")])
        rows.append(
            DeviceSummary(
                device=dev,
                peak_read_bps=(window.peak("disk", dev, "rmb_s") or 0.0) * MIB,
                peak_write_bps=(window.peak("disk", dev, "wmb_s") or 0.0) * MIB,
                peak_await_ms=max(awaits, default=0.0),
                written_bytes=written * MIB,
            )
        )
    return rows


def _used_growth(window: _Window, path: str) -> float | None:
    total = window.change("path", path, "total_bytes")
    free = window.change("path", path, "free_bytes")
    if total is None or free is None:
        return None
    return (total[1] - free[1]) - (total[0] - free[0])


def _filesystem_key(path: str, state: PathState | None) -> FilesystemKey:
    """As core.fill groups paths (one free space, one fill rate); a path never sampled is
    its own group."""
    return (path, None) if state is None else filesystem_key(path, state)


def _filesystem_rows(
    window: _Window, latest: Sample | None, paths: Sequence[str], written: dict[str, float]
) -> list[FilesystemSummary]:
    """One row per filesystem, listing its watched paths in the order they were given."""
    groups: dict[FilesystemKey, list[str]] = {}
    for path in paths:
        state = latest.paths.get(path) if latest is not None else None
        groups.setdefault(_filesystem_key(path, state), []).append(path)
    rows = []
    for members in groups.values():
        state = latest.paths.get(members[0]) if latest is not None else None
        device = state.device if state is not None else None
        growths = (_used_growth(window, p) for p in members)
        rows.append(
            FilesystemSummary(
                paths=members,
                filesystem=state.mountpoint if state is not None else None,
                used_growth_bytes=next((g for g in growths if g is not None), None),
                device=device,
                written_bytes=written.get(device) if device else None,
            )
        )
    return rows


def _gpu_rows(
    window: _Window, history: History, gpu_indices: Sequence[int] | None, defaults: Defaults
) -> list[GpuSummary]:
    rows = []
    for key in sorted(history.keys("gpu")):
        if key[2] != "util_pct" or (gpu_indices is not None and int(key[1]) not in gpu_indices):
            continue
        util = window.values(*key)
        inside = [util[t] for t in window.inside if t in util]
        if not inside:
            continue
        idle = sum(
            t - prev
            for prev, t in pairwise(window.times)
            if t in util and util[t] < defaults.gpu_idle_util_pct
        )
        rows.append(GpuSummary(index=key[1], mean_util_pct=sum(inside) / len(inside), idle_s=idle))
    return rows


def _process_totals(window: _Window, history: History) -> tuple[float | None, float | None]:
    """(write_chars, write_bytes) of this kernel's process tree over the cell."""
    chars: float | None = None
    dirtied: float | None = None
    for key in history.keys("proc"):
        if key[2] not in ("write_bytes_s", "write_chars_s"):
            continue
        total = window.total(*key)
        if total is None:
            continue
        if key[2] == "write_bytes_s":
            dirtied = (dirtied or 0.0) + total
        else:
            chars = (chars or 0.0) + total
    return chars, dirtied


# a path whose share of the cell is below this gets no line of its own (half a percent: less
# than the sampling can tell from zero over a short cell)
WAIT_SHOWN = 0.005


def _wait_rows(window: _Window, history: History, paths: Sequence[str]) -> list[WaitSummary] | None:
    """Per watched path and side, the cell's share of measured time spent waiting there,
    integrated from the per-interval fractions (history series ``wait:<path>:<side>``)."""
    keys = history.keys("wait")
    if not keys:
        return None
    rows = []
    for side in ("main", "workers"):
        for path in paths:
            if (key := ("wait", path, side)) not in keys:
                continue
            vals = window.values(*key)
            seconds = sum(t - prev for prev, t in pairwise(window.times) if t in vals)
            waited = window.total(*key)
            if not seconds or waited is None:
                continue
            calls = {k[2]: window.total(*k) or 0.0 for k in keys if k[1] == path}
            calls = {f.partition(":")[2]: v for f, v in calls.items() if f.startswith(side + ":")}
            top = max(calls, key=calls.__getitem__, default=None)
            rows.append(WaitSummary(path, side, waited / seconds, seconds, top))
    rows.sort(key=lambda w: (w.side != "main", -w.fraction))
    return rows if rows or any(k[2] == "main" for k in keys) else None


def summarize_cell(
    history: History,
    start: float,
    end: float,
    paths: Sequence[str],
    warnings: Sequence[Alert],
    gpu_indices: Sequence[int] | None = None,
    defaults: Defaults = DEFAULTS,
    gpu_note: str | None = None,
) -> CellSummary:
    """Summarise samples with ``start < t <= end`` (plus the one before, as a baseline)."""
    window = _Window.of(history, start, end)
    latest = history.latest
    devices = sorted({k[1] for k in history.keys("disk")})
    if latest is not None:
        under = {s.device for p in paths if (s := latest.paths.get(p)) is not None and s.device}
        if under:  # the devices under the watched paths; every disk when none has one
            devices = [d for d in devices if d in under]
    summary = CellSummary(seconds=end - start, samples=len(window.inside), gpu_note=gpu_note)
    summary.warnings = sort_alerts({a.key: a for a in warnings}.values())
    summary.devices = _device_rows(window, devices)
    written = {d.device: d.written_bytes for d in summary.devices}
    summary.filesystems = _filesystem_rows(window, latest, paths, written)
    summary.gpus = _gpu_rows(window, history, gpu_indices, defaults)
    summary.process_write_chars, summary.process_write_bytes = _process_totals(window, history)
    summary.waits = _wait_rows(window, history, paths)
    return summary


__all__ = [
    "ALERT_MIME",
    "STYLE",
    "CellSummary",
    "alert_html",
    "alert_text",
    "alerts_bundle",
    "snapshot_html",
    "snapshot_text",
    "summarize_cell",
]
