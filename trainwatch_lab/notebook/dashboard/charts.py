"""Which charts the dashboard draws, and which lines each one has for a sample.

Units, the project's one family: rates in decimal MB/s (``DiskRates`` counts MiB/s, so the
lines are scaled by 1.048576), latency in ms, GPU and space in %. Free space is drawn as
% used per *filesystem* (``core.storage.fill.filesystem_key``): paths on one filesystem would draw
identical lines, and a percentage puts a 64 MiB tmpfs and a 4 TiB disk on one readable
scale (a GiB scale from 0 left the small one flat at the bottom). Time lost to storage
(core.processes.waits) is drawn stacked by watched path, the training loop's main thread filled, its
worker processes as plain lines over it (they wait apart from the loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.defaults import MB_PER_MIB
from ...core.history import History
from ...core.model import Sample, watched_devices
from ...core.storage.fill import filesystem_key
from .bqcharts import Series, TimeChart

COMPACT = ("gpu", "io", "space")  # always in view (GPU only when there is one)
DETAILED = ("await", "util", "waits")  # under Details: made and fed only once opened


def make_chart(name: str) -> TimeChart:
    """The dashboard's charts by name (the browser tests find them by ``tw-chart-NAME``)."""
    if name == "gpu":
        return TimeChart("GPU", "%", y_max=100.0, name="gpu")
    if name == "io":
        return TimeChart("Disk", "MB/s", name="io")
    if name == "space":
        return TimeChart("Space used", "% per filesystem", y_max=100.0, name="space")
    if name == "await":
        return TimeChart("Disk await", "ms", name="await")
    if name == "util":
        return TimeChart("Disk busy", "% util", y_max=100.0, name="util")
    if name == "waits":
        return TimeChart("Time lost to storage", "% of time", y_max=100.0, name="waits", fill=True)
    raise KeyError(name)


def gpu_series(indices: Sequence[int | str]) -> list[Series]:
    """Utilization and memory used per GPU (by CUDA index)."""
    out = []
    for index in indices:
        i = str(index)
        out.append(Series(f"GPU{i} util", (("gpu", i, "util_pct"),)))
        out.append(
            Series(
                f"GPU{i} mem",
                (("gpu", i, "mem_used_bytes"), ("gpu", i, "mem_total_bytes")),
                kind="ratio_pct",
            )
        )
    return out


def io_series(devices: Sequence[str]) -> list[Series]:
    return [
        s
        for d in devices
        for s in (
            Series(f"{d} read", (("disk", d, "rmb_s"),), scale=MB_PER_MIB),
            Series(f"{d} write", (("disk", d, "wmb_s"),), scale=MB_PER_MIB),
        )
    ]


def await_series(devices: Sequence[str]) -> list[Series]:
    return [
        Series(
            d,
            (
                ("disk", d, "r_await"),
                ("disk", d, "w_await"),
                ("disk", d, "r_s"),
                ("disk", d, "w_s"),
            ),
            kind="await",
        )
        for d in devices
    ]


def util_series(devices: Sequence[str]) -> list[Series]:
    return [Series(d, (("disk", d, "util"),)) for d in devices]


def filesystem_label(mountpoint: str, fstype: str | None, keep: int = 28) -> str:
    """``/scratch (xfs)``, the front cut with an ellipsis when long."""
    where = mountpoint if len(mountpoint) <= keep else "…" + mountpoint[-(keep - 1) :]
    return f"{where} ({fstype})" if fstype else where


def space_series(sample: Sample) -> list[Series]:
    """One line per filesystem under the watched paths, from one of its paths."""
    seen: dict[Any, Series] = {}
    for path, p in sorted(sample.paths.items()):
        if not p.total_bytes or p.avail_bytes is None:
            continue
        key = filesystem_key(path, p)
        if key not in seen:
            label = filesystem_label(p.mountpoint or path, p.fstype)
            keys = tuple(("path", path, f) for f in ("avail_bytes", "total_bytes", "free_bytes"))
            seen[key] = Series(label, keys, kind="used_pct")
    return list(seen.values())


def waits_series(sample: Sample, history: History | None) -> list[Series]:
    """Per watched path, the share of time the main thread waited there (stacked), then its
    workers'. From the history's columns, not this sample's keys: a tick that was not
    measured must not make the legend blink."""
    if history is None:
        return []
    keys = {(k[1], k[2]) for k in history.keys("wait") if k[1] in sample.paths}
    paths = sorted({path for path, _ in keys})
    main = [
        Series(filesystem_label(p, None), (("wait", p, "main"),), scale=100.0, stacked=True)
        for p in paths
        if (p, "main") in keys
    ]
    workers = [
        Series(f"{filesystem_label(p, None)} workers", (("wait", p, "workers"),), scale=100.0)
        for p in paths
        if (p, "workers") in keys
    ]
    return main + workers


def series_for(
    name: str, sample: Sample, gpus: Sequence[Any], history: History | None = None
) -> list[Series]:
    if name == "waits":
        return waits_series(sample, history)
    devices = watched_devices(sample)
    if name == "gpu":
        return gpu_series([g.index for g in gpus])
    if name == "io":
        return io_series(devices)
    if name == "space":
        return space_series(sample)
    if name == "await":
        return await_series(devices)
    return util_series(devices)
