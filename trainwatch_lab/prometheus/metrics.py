"""A Sample as Prometheus metrics: node_exporter's names where node_exporter measures the same
thing, ``trainwatch_*`` for the rest.

Why node_exporter's names: node-mixin's alerts, Grafana's node dashboards and the fleet view
then work on a node that runs our agent exactly as on one that runs node_exporter, with no
relabelling. Names, types, labels and HELP texts are node_exporter 1.5's (diskstats_linux.go,
filesystem_common.go); ``device`` of a ``node_filesystem_*`` series is the mount source,
``device`` of a ``node_disk_*`` series the block device, as there. Only the devices and
filesystems under the watched paths are exported: node_exporter beside us covers the rest.

GPUs: ``trainwatch_gpu_*`` with DCGM exporter's labels (``gpu``: the NVML index, ``UUID``,
``modelName``), not DCGM's ``DCGM_FI_*`` names: a node running DCGM exporter too would
otherwise count every GPU twice in a ``sum``, and ours are in base units (bytes, not MiB).
Join the two on ``UUID``.

A scrape never samples: it formats the latest finished Sample (``SampleCollector`` takes it
as a callable) and the disk source's counters of the same moment, both from memory. Every
metric is listed in ``names.SPECS``, whose table ``names.metrics_table`` prints for the docs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ..advice.check import verdict_for
from ..core.gpu.select import as_selection
from ..core.model import PathState, Sample
from ..core.storage.diskstats import SECTOR_BYTES, DiskCounters
from .names import BY_NAME, SPECS

Latest = Callable[[], Sample | None]
Counters = Callable[[], Mapping[str, DiskCounters]]


# node_disk_* counters from the 11 classic /proc/diskstats fields: sectors are 512 bytes and
# times milliseconds whatever the device (Documentation/admin-guide/iostats.rst)
_MS = 0.001
DISK_VALUES: tuple[tuple[str, Callable[[DiskCounters], float]], ...] = (
    ("node_disk_reads_completed_total", lambda c: c.rd_ios),
    ("node_disk_reads_merged_total", lambda c: c.rd_merges),
    ("node_disk_read_bytes_total", lambda c: c.rd_sectors * SECTOR_BYTES),
    ("node_disk_read_time_seconds_total", lambda c: c.rd_ticks * _MS),
    ("node_disk_writes_completed_total", lambda c: c.wr_ios),
    ("node_disk_writes_merged_total", lambda c: c.wr_merges),
    ("node_disk_written_bytes_total", lambda c: c.wr_sectors * SECTOR_BYTES),
    ("node_disk_write_time_seconds_total", lambda c: c.wr_ticks * _MS),
    ("node_disk_io_now", lambda c: c.in_flight),
    ("node_disk_io_time_seconds_total", lambda c: c.io_ticks * _MS),
    ("node_disk_io_time_weighted_seconds_total", lambda c: c.time_in_queue * _MS),
)
GPU_VALUES: tuple[tuple[str, str], ...] = (  # metric, GpuState field (base units already)
    ("trainwatch_gpu_utilization_percent", "util_pct"),
    ("trainwatch_gpu_memory_utilization_percent", "mem_util_pct"),
    ("trainwatch_gpu_memory_used_bytes", "mem_used_bytes"),
    ("trainwatch_gpu_memory_total_bytes", "mem_total_bytes"),
    ("trainwatch_gpu_process_memory_bytes", "process_mem_bytes"),
    ("trainwatch_gpu_power_watts", "power_w"),
    ("trainwatch_gpu_power_limit_watts", "power_limit_w"),
    ("trainwatch_gpu_temperature_celsius", "temp_c"),
    ("trainwatch_gpu_pcie_rx_bytes_per_second", "pcie_rx_bps"),
    ("trainwatch_gpu_pcie_tx_bytes_per_second", "pcie_tx_bps"),
)
PROCESS_VALUES: tuple[tuple[str, str], ...] = (
    ("trainwatch_process_read_bytes_per_second", "read_bytes_s"),
    ("trainwatch_process_write_bytes_per_second", "write_bytes_s"),
    ("trainwatch_process_read_chars_per_second", "read_chars_s"),
    ("trainwatch_process_write_chars_per_second", "write_chars_s"),
    ("trainwatch_process_pids", "pids"),
)


class _Families:
    """The families of one scrape, made on first use: an empty one is never sent."""

    def __init__(self) -> None:
        self.made: dict[str, Metric] = {}

    def add(self, name: str, labels: Iterable[str], value: Any) -> None:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return  # unknown (not supported here, not measured yet): no sample, never NaN
        family = self.made.get(name)
        if family is None:
            spec = BY_NAME[name]
            make = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
            family = self.made[name] = make(name, spec.help, labels=spec.labels)
        family.add_metric(list(labels), float(value))

    def in_order(self) -> list[Metric]:
        return [self.made[s.name] for s in SPECS if s.name in self.made]


def _filesystem_labels(p: PathState) -> tuple[str, str, str]:
    return (p.source or "", p.mountpoint or "", p.fstype or "")


def _filesystems(sample: Sample) -> dict[str, PathState]:
    """One watched path per filesystem (the first, as core.storage.fill takes it), storage only."""
    seen: dict[str, PathState] = {}
    for p in sample.paths.values():
        if p.mountpoint and p.kind != "pseudo" and p.mountpoint not in seen:
            seen[p.mountpoint] = p
    return seen


def _add_filesystems(out: _Families, sample: Sample) -> None:
    for p in _filesystems(sample).values():
        labels = _filesystem_labels(p)
        out.add("node_filesystem_device_error", labels, 0 if p.responsive else 1)
        if not p.responsive:
            continue  # node_exporter sends nothing else for a mount that did not answer
        out.add("node_filesystem_readonly", labels, int(p.read_only))
        out.add("node_filesystem_size_bytes", labels, p.total_bytes)
        out.add("node_filesystem_free_bytes", labels, p.free_bytes)
        out.add("node_filesystem_avail_bytes", labels, p.avail_bytes)
        out.add("node_filesystem_files", labels, p.inodes_total)
        out.add("node_filesystem_files_free", labels, p.inodes_free)
        if p.fill is not None:
            out.add("trainwatch_filesystem_fill_rate_bytes_per_second", labels, p.fill.rate_bps)
            out.add("trainwatch_filesystem_seconds_to_full", labels, p.fill.seconds_to_full)
            out.add("trainwatch_filesystem_fill_trend_seconds", labels, p.fill.trend_s)
            out.add("trainwatch_filesystem_fill_points", labels, p.fill.points)


def _add_paths(out: _Families, sample: Sample) -> None:
    for path, p in sample.paths.items():
        verdict = verdict_for(p, sample.warnings)
        out.add(
            "trainwatch_path_info",
            (
                path,
                p.mountpoint or "",
                p.fstype or "",
                p.kind,
                verdict,
                "true" if p.shared else "false",
                p.device or "",
            ),
            1,
        )
        if p.probe is not None and p.probe.p50_ms is not None:
            out.add("trainwatch_probe_p50_seconds", (path,), p.probe.p50_ms * _MS)
            if p.probe.p99_ms is not None:
                out.add("trainwatch_probe_p99_seconds", (path,), p.probe.p99_ms * _MS)
        if p.checkpoints is not None:
            ck = p.checkpoints
            out.add("trainwatch_checkpoint_count", (path,), ck.count)
            out.add("trainwatch_checkpoint_newest_bytes", (path,), ck.newest_bytes)
            out.add("trainwatch_checkpoint_newest_timestamp_seconds", (path,), ck.newest_mtime)


def _add_gpus(out: _Families, sample: Sample, gpus: Collection[int | str] | None) -> None:
    selected = as_selection(list(gpus)) if gpus is not None else None
    for g in sample.gpus:
        if g.lost or (selected is not None and g not in selected):
            continue
        labels = (str(g.nvml_index), g.uuid, g.name)
        for name, field in GPU_VALUES:
            out.add(name, labels, getattr(g, field))
        for reason in g.clock_reasons:
            out.add("trainwatch_gpu_clock_event_reason", (*labels, reason), 1)


def families(
    sample: Sample | None,
    counters: Mapping[str, DiskCounters] | None = None,
    gpus: Collection[int | str] | None = None,
    process: bool = True,
) -> list[Metric]:
    """Every metric of ``sample`` (and of the disk ``counters`` read with it); ``gpus``
    limits the GPUs to those indices (CUDA's, as ``--gpu`` names them); ``process=False``
    leaves out the watched process tree (an agent that watches only itself)."""
    out = _Families()
    for device, c in sorted((counters or {}).items()):
        for name, value in DISK_VALUES:
            out.add(name, (device,), value(c))
    if sample is None:
        return out.in_order()
    _add_filesystems(out, sample)
    _add_paths(out, sample)
    for alert in sample.warnings:
        out.add("trainwatch_warning", (alert.code, alert.severity, alert.subject), 1)
    if process and sample.process is not None:
        pid = str(sample.process.pid)
        for name, field in PROCESS_VALUES:
            out.add(name, (pid,), getattr(sample.process, field))
    _add_gpus(out, sample, gpus)
    out.add("trainwatch_sample_timestamp_seconds", (), sample.t)
    return out.in_order()


class SampleCollector(Collector):
    """A ``prometheus_client`` collector over "the latest sample".

    ``latest`` returns the newest *finished* Sample (the one a Sampler hands its
    subscribers: ``sampler.latest`` may be a tick still being evaluated, without its
    warnings); ``counters`` the disk source's raw counters (``disk_counters``). Both are
    read from memory on every scrape, so a scrape never waits on a disk or a mount."""

    def __init__(
        self,
        latest: Latest,
        counters: Counters | None = None,
        gpus: Collection[int | str] | None = None,
        process: bool = True,
    ) -> None:
        self.latest = latest
        self.counters = counters
        self.gpus = gpus
        self.process = process

    def describe(self) -> Iterable[Metric]:
        return []  # which series exist depends on the sample: nothing to check up front

    def collect(self) -> Iterator[Metric]:
        counters = self.counters() if self.counters is not None else None
        yield from families(self.latest(), counters, self.gpus, self.process)


def disk_counters(sampler: Any) -> Counters | None:
    """The raw-counter reader of a Sampler's disk source, or None when it has none."""
    source = sampler.find_source("disks")
    reader = getattr(source, "counters", None)
    return reader if callable(reader) else None


def exposition(
    sample: Sample | None,
    counters: Mapping[str, DiskCounters] | None = None,
    gpus: Collection[int | str] | None = None,
) -> bytes:
    """The Prometheus text format (0.0.4) of one sample: what a handler sends for a scrape."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SampleCollector(lambda: sample, lambda: counters or {}, gpus))
    return generate_latest(registry)
