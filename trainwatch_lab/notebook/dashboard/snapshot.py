"""The dashboard's widget-free snapshot: plain text and HTML of the latest sample.

What nbconvert, terminal IPython and an untrusted notebook show of a ``TrainWatch`` instead
of its widgets; numbers go through advice.text so every surface formats them the same way.
"""

from __future__ import annotations

from typing import Any

from ...advice.text import fill_text, fmt_bytes, fmt_mbs, fmt_ms, space_text
from ...core.history import History
from ...core.model import PathState, Sample, watched_devices
from ..warnings_html import STYLE, alert_html, alert_text, esc

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
                f"  disk {name}: read {fmt_mbs(d.read_bps)}, write {fmt_mbs(d.write_bps)}, "
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
                f"<tr><td>{esc(name)}</td><td>{esc(fmt_mbs(d.read_bps))}</td>"
                f"<td>{esc(fmt_mbs(d.write_bps))}</td>"
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
