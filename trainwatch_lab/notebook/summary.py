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
from typing import Any

from ..advice.text import fmt_bytes, fmt_duration, fmt_ms, fmt_pct, fmt_rate
from ..core.defaults import DEFAULTS, MIB, Defaults
from ..core.history import History
from ..core.model import SEVERITY_RANK, Alert, PathState, Sample

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


def fill_text(history: History, path: str, defaults: Defaults = DEFAULTS) -> str:
    """Fill rate and time to full, from the same least-squares fit the disk-filling rule uses."""
    from ..advice.storage import fill_for

    est = fill_for(history, path, defaults)
    if est is None:
        return "fill rate: measuring"
    if est.rate_bps <= defaults.fill_min_rate_bps:
        return "not filling"
    ttf = est.seconds_to_full
    return f"filling at {fmt_rate(est.rate_bps)}, full in {fmt_duration(ttf)}"


def watched_devices(sample: Sample) -> list[str]:
    """The block devices under the watched paths; every disk when no path has one."""
    devices = sorted({p.device for p in sample.paths.values() if p.device})
    return devices or sorted(sample.disks)


# -- the dashboard snapshot (no-widget fallback) -----------------------------------------


def snapshot_text(sample: Sample | None, history: History | None = None) -> str:
    if sample is None:
        return "trainwatch: waiting for the first sample"
    lines = [f"trainwatch at {_clock(sample.t)}"]
    for path, p in sorted(sample.paths.items()):
        lines.append(f"  {path}: {mount_text(p)}; {latency_text(p)}; {space_text(p)}")
        if history is not None:
            lines.append(f"    {fill_text(history, path)}")
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
        fill = fill_text(history, path) if history is not None else ""
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


@dataclass
class DeviceSummary:
    device: str
    peak_read_bps: float
    peak_write_bps: float
    peak_await_ms: float
    written_bytes: float  # integrated write rate over the cell


@dataclass
class GpuSummary:
    index: str
    mean_util_pct: float
    idle_s: float


@dataclass
class PathSummary:
    path: str
    filesystem: str | None  # its mountpoint: paths on one filesystem share the numbers below
    used_growth_bytes: float | None  # growth of used space on that filesystem during the cell
    device: str | None
    written_bytes: float | None  # written to its block device by every process, during the cell


@dataclass
class CellSummary:
    """What a ``%%trainwatch`` cell did to storage and GPU, from the History of its run."""

    seconds: float
    samples: int
    devices: list[DeviceSummary] = field(default_factory=list)
    gpus: list[GpuSummary] = field(default_factory=list)
    paths: list[PathSummary] = field(default_factory=list)
    warnings: list[Alert] = field(default_factory=list)
    gpu_note: str | None = None
    process_write_bytes: float | None = None  # this kernel and its children, block layer
    process_write_chars: float | None = None  # ... every write() call (network/FUSE included)

    def to_text(self) -> str:
        lines = [f"trainwatch: cell ran {fmt_duration(self.seconds)} ({self.samples} samples)"]
        if not self.samples:
            lines.append("  (it ended before the first sample)")
        for d in self.devices:
            lines.append(
                f"  disk {d.device}: peak read {fmt_rate(d.peak_read_bps)}, peak write "
                f"{fmt_rate(d.peak_write_bps)}, peak await {fmt_ms(d.peak_await_ms)}, "
                f"written {fmt_bytes(d.written_bytes)}"
            )
        for g in self.gpus:
            lines.append(
                f"  GPU {g.index}: mean util {g.mean_util_pct:.0f} %, idle {fmt_duration(g.idle_s)}"
            )
        if not self.gpus and self.gpu_note:
            lines.append(f"  GPU: {self.gpu_note}")
        for p in self.paths:
            lines.append(f"  {p.path}: {_path_written(p)}")
        proc = _process_text(self)
        if proc:
            lines.append(f"  {proc}")
        for a in self.warnings:
            lines.append("  " + alert_text(a))
        if not self.warnings:
            lines.append("  no warnings raised")
        return "\n".join(lines)

    def to_html(self) -> str:
        dev = "".join(
            f"<tr><td>{esc(d.device)}</td><td>{esc(fmt_rate(d.peak_read_bps))}</td>"
            f"<td>{esc(fmt_rate(d.peak_write_bps))}</td><td>{esc(fmt_ms(d.peak_await_ms))}</td>"
            f"<td>{esc(fmt_bytes(d.written_bytes))}</td></tr>"
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
            f"<tr><td><code>{esc(p.path)}</code></td><td>{esc(_path_written(p))}</td></tr>"
            for p in self.paths
        )
        proc = _process_text(self)
        if proc:
            paths += f'<tr><td class="tw-muted">this kernel</td><td>{esc(proc)}</td></tr>'
        warnings = "".join(alert_html(a) for a in self.warnings) or (
            '<div class="tw-muted">no warnings raised</div>'
        )
        note = "" if self.samples else " — it ended before the first sample"
        return (
            f'<div class="tw-root tw-cell-summary" data-samples="{self.samples}">'
            f"<style>{STYLE}</style>"
            f'<div class="tw-title">trainwatch: cell ran {esc(fmt_duration(self.seconds))} '
            f'<span class="tw-muted">({self.samples} samples{note})</span></div>'
            '<table class="tw-table"><tr><th>disk</th><th>peak read</th><th>peak write</th>'
            f"<th>peak await</th><th>written</th></tr>{dev}</table>"
            '<table class="tw-table"><tr><th>GPU</th><th>mean util</th><th>idle</th></tr>'
            f"{gpu}</table>"
            '<table class="tw-table"><tr><th>watched path</th><th>written</th></tr>'
            f"{paths}</table>{warnings}</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.to_text(), "text/html": self.to_html()}


def _path_written(p: PathSummary) -> str:
    parts = []
    where = f" on {p.filesystem}" if p.filesystem else ""
    if p.used_growth_bytes is not None:
        sign = "+" if p.used_growth_bytes >= 0 else ""
        parts.append(f"space used{where} {sign}{fmt_bytes(p.used_growth_bytes)}")
    if p.device is not None and p.written_bytes is not None:
        parts.append(f"{fmt_bytes(p.written_bytes)} written to {p.device} (all processes)")
    return "; ".join(parts) or "no data"


def _process_text(s: CellSummary) -> str | None:
    if s.process_write_bytes is None and s.process_write_chars is None:
        return None
    return (
        f"this kernel wrote {fmt_bytes(s.process_write_chars)} "
        f"({fmt_bytes(s.process_write_bytes)} reached a block device)"
    )


def _finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _integrate(ts: Sequence[float], rates: Sequence[float]) -> float:
    """Bytes from a rate series: each rate covers the interval that ends at its sample."""
    total = 0.0
    for i in range(1, len(ts)):
        total += rates[i] * max(0.0, ts[i] - ts[i - 1])
    return total


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
    times = [t for t in history.times() if t <= end]
    inside = [t for t in times if t > start]
    before = [t for t in times if t <= start]
    since = before[-1] - 1e-6 if before else start  # keep one baseline sample
    summary = CellSummary(seconds=end - start, samples=len(inside))
    summary.warnings = sort_alerts({a.key: a for a in warnings}.values())
    summary.gpu_note = gpu_note

    def series(kind: str, name: str, fld: str, baseline: bool = False) -> tuple[list, list]:
        ts, vs = history.series(kind, name, fld, since=since if baseline else start)
        keep = [i for i, t in enumerate(ts) if t <= end]
        return [ts[i] for i in keep], [vs[i] for i in keep]

    path_devices = {}
    for key in history.keys("path"):
        if key[1] in paths:
            path_devices.setdefault(key[1], None)
    latest = history.latest
    if latest is not None:
        for p in paths:
            state = latest.paths.get(p)
            path_devices[p] = state.device if state else None

    devices = sorted({k[1] for k in history.keys("disk")})
    wanted = {d for d in path_devices.values() if d}
    for dev in devices:
        if wanted and dev not in wanted:
            continue
        ts, rmb = series("disk", dev, "rmb_s")
        _, wmb = series("disk", dev, "wmb_s")
        _, ra = series("disk", dev, "r_await")
        _, wa = series("disk", dev, "w_await")
        if not ts:
            continue
        bts, bw = series("disk", dev, "wmb_s", baseline=True)
        summary.devices.append(
            DeviceSummary(
                device=dev,
                peak_read_bps=max(_finite(rmb), default=0.0) * MIB,
                peak_write_bps=max(_finite(wmb), default=0.0) * MIB,
                peak_await_ms=max(_finite(ra + wa), default=0.0),
                written_bytes=_integrate(bts, [v * MIB for v in bw]),
            )
        )
    written = {d.device: d.written_bytes for d in summary.devices}

    for key in sorted(history.keys("gpu")):
        if key[2] != "util_pct":
            continue
        if gpu_indices is not None and int(key[1]) not in gpu_indices:
            continue
        ts, util = series("gpu", key[1], "util_pct", baseline=True)
        inside_util = [u for t, u in zip(ts, util, strict=True) if t > start]
        if not inside_util:
            continue
        idle = sum(
            ts[i] - ts[i - 1] for i in range(1, len(ts)) if util[i] < defaults.gpu_idle_util_pct
        )
        summary.gpus.append(
            GpuSummary(index=key[1], mean_util_pct=sum(inside_util) / len(inside_util), idle_s=idle)
        )

    mountpoints: dict[str, str | None] = {}
    if latest is not None:
        for p in paths:
            state = latest.paths.get(p)
            mountpoints[p] = state.mountpoint if state else None
    growth_by_fs: dict[str, tuple[int, float]] = {}  # fs -> (points, growth): longest wins
    growth_by_path: dict[str, float | None] = {}
    for p in paths:
        ts, total = series("path", p, "total_bytes", baseline=True)
        _, free = series("path", p, "free_bytes", baseline=True)
        growth = None
        if len(ts) >= 2 and len(free) == len(ts):
            growth = (total[-1] - free[-1]) - (total[0] - free[0])
        growth_by_path[p] = growth
        fs = mountpoints.get(p)
        if fs is not None and growth is not None and len(ts) > growth_by_fs.get(fs, (0, 0))[0]:
            growth_by_fs[fs] = (len(ts), growth)
    for p in paths:
        dev = path_devices.get(p)
        fs = mountpoints.get(p)
        summary.paths.append(
            PathSummary(
                path=p,
                filesystem=fs,
                used_growth_bytes=growth_by_fs[fs][1] if fs in growth_by_fs else growth_by_path[p],
                device=dev,
                written_bytes=written.get(dev) if dev else None,
            )
        )

    for key in history.keys("proc"):
        if key[2] not in ("write_bytes_s", "write_chars_s"):
            continue
        ts, rate = series("proc", key[1], key[2], baseline=True)
        if len(ts) >= 2:
            total = _integrate(ts, rate)
            if key[2] == "write_bytes_s":
                summary.process_write_bytes = (summary.process_write_bytes or 0) + total
            else:
                summary.process_write_chars = (summary.process_write_chars or 0) + total
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
