"""The ``%%trainwatch`` cell summary's numbers: ``summarize_cell`` reads the samples one
cell owns from the History and builds its CellSummary (cell_report.py words it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ...core.defaults import DEFAULTS, MIB, Defaults
from ...core.history import History
from ...core.model import PathState, Sample
from ...core.paths.written import Written
from ...core.storage.fill import FilesystemKey, filesystem_key
from .report import CellSummary, DeviceSummary, FilesystemSummary, GpuSummary, WaitSummary
from .warnings import CellWarning


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
    """As core.storage.fill groups paths (one free space, one fill rate); a path never sampled is
    its own group."""
    return (path, None) if state is None else filesystem_key(path, state)


def _filesystem_rows(
    window: _Window,
    latest: Sample | None,
    paths: Sequence[str],
    written: dict[str, float],
    files: Mapping[str, Written | None],
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
                files={p: files.get(p) for p in members},
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
    warnings: Sequence[CellWarning],
    gpu_indices: Sequence[int] | None = None,
    defaults: Defaults = DEFAULTS,
    gpu_note: str | None = None,
    files: Mapping[str, Written | None] | None = None,
) -> CellSummary:
    """Summarise samples with ``start < t <= end`` (plus the one before, as a baseline);
    ``files``: per watched path, the files written under it during the cell;
    ``warnings``: the cell's, one per condition (cell_warnings.WarningLog)."""
    window = _Window.of(history, start, end)
    latest = history.latest
    devices = sorted({k[1] for k in history.keys("disk")})
    if latest is not None:
        under = {s.device for p in paths if (s := latest.paths.get(p)) is not None and s.device}
        if under:  # the devices under the watched paths; every disk when none has one
            devices = [d for d in devices if d in under]
    summary = CellSummary(seconds=end - start, samples=len(window.inside), gpu_note=gpu_note)
    summary.warnings = list(warnings)
    summary.devices = _device_rows(window, devices)
    written = {d.device: d.written_bytes for d in summary.devices}
    summary.filesystems = _filesystem_rows(window, latest, paths, written, files or {})
    summary.gpus = _gpu_rows(window, history, gpu_indices, defaults)
    summary.process_write_chars, summary.process_write_bytes = _process_totals(window, history)
    summary.waits = _wait_rows(window, history, paths)
    return summary
