"""What a ``%%trainwatch`` cell did, as the user reads it: CellSummary and its rows, in
plain text and HTML (they survive in the saved notebook and in nbconvert). The numbers are
computed by cell_summary.summarize_cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...advice.text import fmt_bytes, fmt_duration, fmt_mbs, fmt_ms, fmt_pct
from ...core.defaults import DEFAULTS
from ...core.paths.written import Written
from ..warnings_html import (
    SEVERITY_LABEL,
    STYLE,
    alert_attrs,
    alert_head_html,
    esc,
    prose_html,
)
from .warnings import CellWarning

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
    # per watched path, the files modified under it during the cell (core.paths.written); None:
    # not listed (the mount did not answer, or no helper)
    files: dict[str, Written | None] = field(default_factory=dict)


@dataclass
class WaitSummary:
    """Time the watched process lost to one watched path during the cell (core.processes.waits)."""

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
    warnings: list[CellWarning] = field(default_factory=list)  # one per condition
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
        for f in self.filesystems:
            lines += [f"  {p}: {files_text(f.files.get(p))}" for p in f.paths]
            lines.append(f"    {_filesystem_text(f)}")
        proc = _process_text(self)
        if proc:
            lines.append(f"  {proc}")
        lines += [f"  {line}" for line in self.waits_lines()]
        lines += [line for w in self.warnings for line in _warning_text(w)] or [
            "  no warnings raised"
        ]
        return "\n".join(lines)

    def waits_lines(self) -> list[str]:
        """``this cell spent 31 % of 42 s waiting on /mnt/share/runs, mostly fsync``."""
        if self.waits is None:
            return []
        cell = fmt_duration(self.seconds)
        shown = [w for w in self.waits if w.fraction >= DEFAULTS.wait_shown]
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
            f"<td>{esc(fmt_mbs(d.peak_read_bps))}</td><td>{esc(fmt_mbs(d.peak_write_bps))}</td>"
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
        paths = "".join(_filesystem_rows_html(f) for f in self.filesystems)
        proc = _process_text(self)
        if proc:
            paths += (
                f'<tr><td class="tw-muted">this kernel</td><td colspan="2">{esc(proc)}</td></tr>'
            )
        waits = "".join(f'<div class="tw-waits">{esc(line)}</div>' for line in self.waits_lines())
        warnings = "".join(_warning_html(w) for w in self.warnings) or (
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
            '<table class="tw-table tw-written"><tr><th>watched path</th><th>written there</th>'
            "<th>its filesystem</th></tr>"
            f"{paths}</table>{waits}{warnings}</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.to_text(), "text/html": self.to_html()}


def _device_text(d: DeviceSummary) -> str:
    return (
        f"{fmt_bytes(d.written_bytes)} written during the cell (all processes); "
        f"peak read {fmt_mbs(d.peak_read_bps)}, peak write {fmt_mbs(d.peak_write_bps)}, "
        f"peak await {fmt_ms(d.peak_await_ms)}"
    )


def files_text(w: Written | None, verb: str = " written") -> str:
    """``24 MiB in 8 files written`` (files modified during the cell, at their size now);
    ``verb=""`` where a column header says it."""
    if w is None:
        return f"files{verb}: not listed" if verb else "not listed"
    count = f"{w.files} file{'s' * (w.files != 1)}"
    text = f"{fmt_bytes(w.bytes)} in {count}{verb}" if w.files else f"no file{verb}"
    return text if w.complete else f"at least {text} (the listing stopped at its budget)"


def _filesystem_rows_html(f: FilesystemSummary) -> str:
    """One row per watched path; the filesystem's numbers once, beside all its paths."""
    shared = f'<td rowspan="{len(f.paths)}">{esc(_filesystem_text(f))}</td>'
    return "".join(
        f'<tr data-path="{esc(p)}"><td><code>{esc(p)}</code></td>'
        f'<td class="tw-files">{esc(files_text(f.files.get(p), ""))}</td>{shared if i == 0 else ""}'
        "</tr>"
        for i, p in enumerate(f.paths)
    )


def _filesystem_text(f: FilesystemSummary) -> str:
    parts = []
    where = f" on {f.filesystem}" if f.filesystem else ""
    if f.used_growth_bytes is None and f.filesystem:
        parts.append(f.filesystem)
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


def _warning_text(w: CellWarning) -> list[str]:
    a = w.alert
    return [
        f"  {SEVERITY_LABEL[a.severity]} [{a.code}] {a.subject}: {w.span_text()}",
        f"    {a.message}",
        f"    Fix: {a.fix}",
    ]


def _warning_html(w: CellWarning) -> str:
    """One line per condition (its sentence and fix open from it): the summary replaces the
    cell's strip above the warnings shown as they were raised, which say it in full."""
    a = w.alert
    return (
        f'<details {alert_attrs(a)} data-subject="{esc(a.subject)}" data-raises="{w.raises}">'
        f'<summary style="cursor:pointer">{alert_head_html(a)} {esc(a.subject)} '
        f'<span class="tw-muted">· {esc(w.span_text())}</span></summary>'
        f"{prose_html(a.message)}<br><b>Fix:</b> {prose_html(a.fix)}</details>"
    )
