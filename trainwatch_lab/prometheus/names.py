"""Every metric trainwatch exports: name, type, labels and HELP text, in one table that the
collector (``metrics``) and the docs (``metrics_table``) both read.

node_exporter's HELP texts are copied as node_exporter 1.5 sends them, so a series reads the
same whoever exported it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DISK = ("device",)
FILESYSTEM = ("device", "mountpoint", "fstype")
PATH = ("path",)
GPU = ("gpu", "UUID", "modelName")


@dataclass(frozen=True, slots=True)
class Spec:
    """One metric: its name, type, labels and HELP text (node_exporter's, for its names)."""

    name: str
    kind: Literal["counter", "gauge"]
    labels: tuple[str, ...]
    help: str


def _s(name: str, kind: Literal["counter", "gauge"], labels: tuple[str, ...], help: str) -> Spec:
    return Spec(name, kind, labels, help)


SPECS: tuple[Spec, ...] = (
    # node_exporter diskstats (from /proc/diskstats, the counters of the latest tick)
    _s(
        "node_disk_reads_completed_total",
        "counter",
        DISK,
        "The total number of reads completed successfully.",
    ),
    _s("node_disk_reads_merged_total", "counter", DISK, "The total number of reads merged."),
    _s(
        "node_disk_read_bytes_total",
        "counter",
        DISK,
        "The total number of bytes read successfully.",
    ),
    _s(
        "node_disk_read_time_seconds_total",
        "counter",
        DISK,
        "The total number of seconds spent by all reads.",
    ),
    _s(
        "node_disk_writes_completed_total",
        "counter",
        DISK,
        "The total number of writes completed successfully.",
    ),
    _s("node_disk_writes_merged_total", "counter", DISK, "The number of writes merged."),
    _s(
        "node_disk_written_bytes_total",
        "counter",
        DISK,
        "The total number of bytes written successfully.",
    ),
    _s(
        "node_disk_write_time_seconds_total",
        "counter",
        DISK,
        "This is the total number of seconds spent by all writes.",
    ),
    _s("node_disk_io_now", "gauge", DISK, "The number of I/Os currently in progress."),
    _s("node_disk_io_time_seconds_total", "counter", DISK, "Total seconds spent doing I/Os."),
    _s(
        "node_disk_io_time_weighted_seconds_total",
        "counter",
        DISK,
        "The weighted # of seconds spent doing I/Os.",
    ),
    # node_exporter filesystem (statvfs of the watched paths' filesystems, one per mount point)
    _s("node_filesystem_size_bytes", "gauge", FILESYSTEM, "Filesystem size in bytes."),
    _s("node_filesystem_free_bytes", "gauge", FILESYSTEM, "Filesystem free space in bytes."),
    _s(
        "node_filesystem_avail_bytes",
        "gauge",
        FILESYSTEM,
        "Filesystem space available to non-root users in bytes.",
    ),
    _s("node_filesystem_files", "gauge", FILESYSTEM, "Filesystem total file nodes."),
    _s("node_filesystem_files_free", "gauge", FILESYSTEM, "Filesystem total free file nodes."),
    _s("node_filesystem_readonly", "gauge", FILESYSTEM, "Filesystem read-only status."),
    _s(
        "node_filesystem_device_error",
        "gauge",
        FILESYSTEM,
        "Whether an error occurred while getting statistics for the given device.",
    ),
    # trainwatch: watched paths
    _s(
        "trainwatch_path_info",
        "gauge",
        ("path", "mountpoint", "fstype", "kind", "verdict", "shared", "device"),
        "A watched path (always 1): its filesystem, its kind (local, shared, memory, ...), the "
        "verdict of `trainwatch-lab check`, whether it is shared, and its block device (as "
        "node_disk_*'s device; empty when none).",
    ),
    _s(
        "trainwatch_probe_p50_seconds",
        "gauge",
        PATH,
        "Median latency of a 4 KiB write + fsync in the path (the latest probe).",
    ),
    _s(
        "trainwatch_probe_p99_seconds",
        "gauge",
        PATH,
        "99th percentile latency of a 4 KiB write + fsync in the path (the latest probe).",
    ),
    _s(
        "trainwatch_checkpoint_count",
        "gauge",
        PATH,
        "Checkpoint saves (files or checkpoint folders) in the watched directory.",
    ),
    _s(
        "trainwatch_checkpoint_newest_bytes",
        "gauge",
        PATH,
        "Size of the newest checkpoint save in the watched directory, in bytes.",
    ),
    _s(
        "trainwatch_checkpoint_newest_timestamp_seconds",
        "gauge",
        PATH,
        "When the newest checkpoint save was written (Unix time).",
    ),
    # trainwatch: one fill estimate per filesystem (core.storage.fill)
    _s(
        "trainwatch_filesystem_fill_rate_bytes_per_second",
        "gauge",
        FILESYSTEM,
        "How fast free space shrinks (least-squares fit over the current stretch of shrinking free"
        " space; 0 when steady, negative while freeing).",
    ),
    _s(
        "trainwatch_filesystem_seconds_to_full",
        "gauge",
        FILESYSTEM,
        "Seconds until no space is left at the current fill rate (only while filling).",
    ),
    _s(
        "trainwatch_filesystem_fill_trend_seconds",
        "gauge",
        FILESYSTEM,
        "How long free space has gone down without being freed.",
    ),
    _s(
        "trainwatch_filesystem_fill_points",
        "gauge",
        FILESYSTEM,
        "Free-space readings in the current stretch of shrinking free space.",
    ),
    # trainwatch: warnings
    _s(
        "trainwatch_warning",
        "gauge",
        ("code", "severity", "subject"),
        "An active trainwatch warning (always 1): its stable code, severity and subject (path, "
        "device or GPU).",
    ),
    # trainwatch: the watched process tree
    _s(
        "trainwatch_process_read_bytes_per_second",
        "gauge",
        ("pid",),
        "Bytes the watched process tree read from block devices per second (last interval).",
    ),
    _s(
        "trainwatch_process_write_bytes_per_second",
        "gauge",
        ("pid",),
        "Bytes the watched process tree dirtied for block devices per second (last interval).",
    ),
    _s(
        "trainwatch_process_read_chars_per_second",
        "gauge",
        ("pid",),
        "Bytes the watched process tree read per second through any read syscall, network and FUSE"
        " filesystems included (last interval).",
    ),
    _s(
        "trainwatch_process_write_chars_per_second",
        "gauge",
        ("pid",),
        "Bytes the watched process tree wrote per second through any write syscall, network and "
        "FUSE filesystems included (last interval).",
    ),
    _s("trainwatch_process_pids", "gauge", ("pid",), "Processes in the watched process tree."),
    # trainwatch: GPUs (NVML), DCGM exporter's labels
    _s(
        "trainwatch_gpu_utilization_percent",
        "gauge",
        GPU,
        "GPU utilization in percent (NVML; as DCGM_FI_DEV_GPU_UTIL).",
    ),
    _s(
        "trainwatch_gpu_memory_utilization_percent",
        "gauge",
        GPU,
        "GPU memory bandwidth utilization in percent (NVML; as DCGM_FI_DEV_MEM_COPY_UTIL).",
    ),
    _s(
        "trainwatch_gpu_memory_used_bytes",
        "gauge",
        GPU,
        "GPU memory in use, in bytes (DCGM_FI_DEV_FB_USED is in MiB).",
    ),
    _s("trainwatch_gpu_memory_total_bytes", "gauge", GPU, "GPU memory in total, in bytes."),
    _s(
        "trainwatch_gpu_process_memory_bytes",
        "gauge",
        GPU,
        "GPU memory held by the watched process tree, in bytes.",
    ),
    _s(
        "trainwatch_gpu_power_watts",
        "gauge",
        GPU,
        "GPU power draw in watts (as DCGM_FI_DEV_POWER_USAGE).",
    ),
    _s("trainwatch_gpu_power_limit_watts", "gauge", GPU, "GPU power limit in watts."),
    _s(
        "trainwatch_gpu_temperature_celsius",
        "gauge",
        GPU,
        "GPU temperature in degrees Celsius (as DCGM_FI_DEV_GPU_TEMP).",
    ),
    _s(
        "trainwatch_gpu_pcie_rx_bytes_per_second",
        "gauge",
        GPU,
        "PCIe bytes received by the GPU per second.",
    ),
    _s(
        "trainwatch_gpu_pcie_tx_bytes_per_second",
        "gauge",
        GPU,
        "PCIe bytes sent by the GPU per second.",
    ),
    _s(
        "trainwatch_gpu_clock_event_reason",
        "gauge",
        (*GPU, "reason"),
        "A clock event reason that holds now (always 1): gpu_idle, sw_power_cap, hw_slowdown, "
        "sw_thermal, hw_thermal, ...",
    ),
    # trainwatch: the sampler
    _s(
        "trainwatch_sample_timestamp_seconds",
        "gauge",
        (),
        "When the sample these metrics come from was taken (Unix time): a stale value means a "
        "stuck sampler.",
    ),
)
BY_NAME: dict[str, Spec] = {spec.name: spec for spec in SPECS}


def metrics_table() -> str:
    """Every metric as a Markdown table, for the docs."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for spec in SPECS:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "-"
        rows.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.help} |")
    return "\n".join(rows)
