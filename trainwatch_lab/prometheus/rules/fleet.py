"""The fleet's per-host series: PromQL that folds every exporter of a host into one series per
host (or per host and device), and the recording rules ``trainwatch-lab rules`` ships for them.

Why Prometheus aggregates: a cluster of 1000 nodes exports tens of thousands of disk,
filesystem and GPU series; folding them in the Jupyter server cost seconds per listing. Here
``max by``, ``avg by``, ``topk by`` and ``bottomk by`` leave one series per host, so the
server's answer grows with hosts, not with their devices.

A host is the ``instance`` label without its port (``label_replace`` into a ``host`` label:
node_exporter on :9100, DCGM exporter on :9400 and our agent are one machine). The recording
rules (``trainwatch:<level>:<metric>:<op>``, Prometheus's naming convention with our prefix)
record exactly the expressions the panel's server sends inline, so Grafana, alerting and the
panel read the same numbers; the server sends them inline so that it also works against a
store that evaluates no rules of ours (a long-term store, VictoriaMetrics without vmalert).
"""

from __future__ import annotations

from collections.abc import Collection

from ...core.defaults import DEFAULTS, Defaults

# filesystems that are never where training writes (node_exporter's own mount-point and
# type excludes drop most pseudo filesystems already)
SKIP_FSTYPES = "ramfs|squashfs|iso9660|nsfs|autofs|fuse.lxcfs|tracefs|devtmpfs"
FS = f'fstype!~"{SKIP_FSTYPES}"'
FS_LABELS = "host, device, mountpoint, fstype"


def by_host(expr: str) -> str:
    """``expr`` with a ``host`` label: its ``instance`` without the port (``[::1]:9100`` ->
    ``[::1]``); label_replace's regex is anchored at both ends."""
    return f'label_replace({expr}, "host", "$1", "instance", "(.*?)(:[0-9]+)?")'


def _blocks(rate_window: str, d: Defaults) -> dict[str, str]:
    """The per-host (and per host and device) building blocks over the exporters' series,
    by recording-rule name."""
    r = rate_window
    waits = " or ".join(
        f"rate(node_disk_{op}_time_seconds_total[{r}]) / rate(node_disk_{ops}_completed_total"
        f"[{r}]) >= {d.saturated_await_ms / 1000:g}"
        for op, ops in (("read", "reads"), ("write", "writes"))
    )
    avail = (
        f"node_filesystem_avail_bytes{{{FS}}} "
        "unless on(instance, device, mountpoint) node_filesystem_readonly == 1"
    )
    gpu = "max by (host, gpu) ({})"
    return {
        f"trainwatch:host_device:node_disk_io_time_seconds:rate{r}": (
            f"max by (host, device) ({by_host(f'rate(node_disk_io_time_seconds_total[{r}])')})"
        ),
        f"trainwatch:host_device:node_disk_bytes:rate{r}": (
            "max by (host, device) ("
            + by_host(
                f"rate(node_disk_read_bytes_total[{r}]) + rate(node_disk_written_bytes_total[{r}])"
            )
            + ")"
        ),
        f"trainwatch:host_device:node_disk_saturated:rate{r}": (
            "max by (host, device) ("
            + by_host(
                f"rate(node_disk_io_time_seconds_total[{r}]) >= "
                f"{d.saturated_util_pct / 100:g} and on(instance, device) ({waits})"
            )
            + ")"
        ),
        "trainwatch:host_fs:node_filesystem_avail_bytes:max": (
            f"max by ({FS_LABELS}) ({by_host(avail)})"
        ),
        "trainwatch:host_fs:node_filesystem_size_bytes:max": (
            f"max by ({FS_LABELS}) ({by_host(f'node_filesystem_size_bytes{{{FS}}}')})"
        ),
        "trainwatch:host_gpu:trainwatch_gpu_utilization_percent:max": gpu.format(
            by_host("trainwatch_gpu_utilization_percent")
        ),
        "trainwatch:host_gpu:dcgm_fi_dev_gpu_util:max": gpu.format(by_host("DCGM_FI_DEV_GPU_UTIL")),
        "trainwatch:host_gpu:dcgm_stalled:max": gpu.format(
            by_host(
                f"max_over_time(DCGM_FI_DEV_GPU_UTIL[{d.gpu_stalled_for_s:g}s]) "
                f"< {d.gpu_idle_util_pct:g} and on(instance, gpu) DCGM_FI_DEV_FB_USED > 0"
            )
        ),
        "trainwatch:host:up:min": f"min by (host) ({by_host('up')})",
    }


def host_series(
    rate_window: str, d: Defaults = DEFAULTS, recorded: Collection[str] = ()
) -> dict[str, str]:
    """Every per-host series by recording-rule name, building blocks first: what is in
    ``recorded`` (Prometheus records it already) is named, the rest computed from the
    exporters' series. The recording rules are this with every name recorded."""
    s = _blocks(rate_window, d)

    def ref(name: str) -> str:
        return name if name in recorded else s[name]

    avail = ref("trainwatch:host_fs:node_filesystem_avail_bytes:max")
    size = ref("trainwatch:host_fs:node_filesystem_size_bytes:max")
    s["trainwatch:host_fs:node_filesystem_free:ratio"] = f"{avail} / {size}"
    # disk-almost-full as advice.storage judges a path: under 10 % free, or under 2 GiB on a
    # filesystem larger than that (only the flagged filesystems, their free bytes)
    s["trainwatch:host_fs:node_filesystem_avail_bytes:almost_full"] = (
        f"{avail} <= {d.full_fraction:g} * {size} or ({avail} <= {d.full_bytes} "
        f"and on({FS_LABELS}) {size} > {d.full_bytes})"
    )
    for metric in ("trainwatch_gpu_utilization_percent", "dcgm_fi_dev_gpu_util"):
        gpus = ref(f"trainwatch:host_gpu:{metric}:max")
        s[f"trainwatch:host:{metric}:avg"] = f"avg by (host) ({gpus})"
        s[f"trainwatch:host:{metric}:count"] = f"count by (host) ({gpus})"
    s["trainwatch:host:warning_severity:max"] = (  # 3 critical, 2 warning, 1 info
        "max by (host) ("
        + " or ".join(
            f"{rank} * " + by_host(f'trainwatch_warning{{severity="{severity}"}}')
            for severity, rank in (("critical", 3), ("warning", 2), ("info", 1))
        )
        + ")"
    )
    return s


def recording_rules(rate_window: str, d: Defaults = DEFAULTS) -> list[tuple[str, str]]:
    """(record, expr) of every recording rule, building blocks first (a rule reads the
    series the rules before it record)."""
    names = list(host_series(rate_window, d))
    return list(host_series(rate_window, d, names).items())
