"""The fleet, read back from Prometheus: the PromQL behind the panel's Fleet section, and the
answers folded into one entry per host.

Pure functions over Prometheus's HTTP API answers (``data.result`` lists); the server does
the HTTP, off the event loop. Every number a row shows is computed here, once.

Why by host and not by instance: a node commonly runs node_exporter (:9100), DCGM exporter
(:9400) and our agent, three instances of one machine. The host is the instance without its
port; its name is the ``hostname`` label our agents' file_sd targets carry, else the host.
Hosts with only node_exporter and DCGM exporter get the warnings those numbers allow
(``disk-almost-full`` from filesystem avail/size, ``disk-saturated`` from io time and await,
``gpu-stalled`` from ``DCGM_FI_DEV_GPU_UTIL`` with memory held), with our thresholds; a
host that runs our agent gets the agent's own warnings (``trainwatch_warning``), which see
more (mounts, probes, fill trends) and are never doubled by these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..advice.text import fmt_bytes, fmt_duration, fmt_pct
from ..core.defaults import DEFAULTS, Defaults
from .rules_storage import FULL_FIX, SATURATED_FIX

Series = list[dict[str, Any]]  # Prometheus's result: [{"metric": {...}, "value": [t, "v"]}]
Entry = dict[str, Any]

LOOKBACK = "1h"  # a host seen within this is listed, as "gone" once no target names it
SEEN_STEP = "15s"
# filesystems that are never where training writes (node_exporter's own mount-point and
# type excludes drop most pseudo filesystems already)
SKIP_FSTYPES = "ramfs|squashfs|iso9660|nsfs|autofs|fuse.lxcfs|tracefs|devtmpfs"
FS = f'fstype!~"{SKIP_FSTYPES}"'
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}
HOST_RE = re.compile(r"[A-Za-z0-9._\-:\[\]%]{1,255}")  # fullmatch only (issue 24)
STALLED_FIX = (
    "The GPU holds memory but computes nothing: look at where the training loop waits "
    "(py-spy dump --pid PID); a loop blocked on logs or checkpoints on a network share "
    "should write them to local disk (trainwatch_lab.fix.local_mirror)."
)


def instant_queries(rate_window: str, d: Defaults = DEFAULTS) -> dict[str, str]:
    """Every query of one fleet listing, by name; each answers for all hosts at once."""
    r = rate_window
    waits = " or ".join(
        f"rate(node_disk_{op}_time_seconds_total[{r}]) / rate(node_disk_{ops}_completed_total"
        f"[{r}]) >= {d.saturated_await_ms / 1000:g}"
        for op, ops in (("read", "reads"), ("write", "writes"))
    )
    return {
        "up": "up",
        "scraped": "timestamp(up)",  # when each target was last scraped
        "seen": f"max by (instance) (max_over_time(timestamp(up == 1)[{LOOKBACK}:{SEEN_STEP}]))",
        "agent": "trainwatch_sample_timestamp_seconds",
        "warnings": "trainwatch_warning",
        "gpu": "trainwatch_gpu_utilization_percent",
        "dcgm": "DCGM_FI_DEV_GPU_UTIL",
        "dcgm_stalled": (
            f"max_over_time(DCGM_FI_DEV_GPU_UTIL[{d.gpu_stalled_for_s:g}s]) "
            f"< {d.gpu_idle_util_pct:g} and on(instance, gpu) DCGM_FI_DEV_FB_USED > 0"
        ),
        "disk_util": f"rate(node_disk_io_time_seconds_total[{r}])",
        "disk_bytes": (
            f"rate(node_disk_read_bytes_total[{r}]) + rate(node_disk_written_bytes_total[{r}])"
        ),
        "disk_saturated": (
            f"rate(node_disk_io_time_seconds_total[{r}]) >= {d.saturated_util_pct / 100:g} "
            f"and on(instance, device) ({waits})"
        ),
        "fs_avail": (
            f"node_filesystem_avail_bytes{{{FS}}} "
            "unless on(instance, device, mountpoint) node_filesystem_readonly == 1"
        ),
        "fs_size": f"node_filesystem_size_bytes{{{FS}}}",
    }


def host_of(instance: str) -> str:
    """``node1:9100`` -> ``node1``, ``[::1]:9100`` -> ``[::1]``, ``node1`` -> ``node1``."""
    if instance.startswith("["):
        return instance[: instance.index("]") + 1] if "]" in instance else instance
    host, sep, port = instance.rpartition(":")
    return host if sep and port.isdigit() and ":" not in host else instance


def host_selector(host: str) -> str:
    """The label matcher for every instance of ``host`` (any port, or none)."""
    if not HOST_RE.fullmatch(host):
        raise ValueError(f"not a host name or address: {host!r}")
    return f"instance=~`{re.escape(host)}(:[0-9]+)?`"


def _value(item: Mapping[str, Any]) -> float | None:
    try:
        v = float(item["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _hosts(results: Mapping[str, Series], names: Iterable[str]) -> Iterable[tuple[str, Any]]:
    for name in names:
        for item in results.get(name, ()):
            instance = item.get("metric", {}).get("instance")
            if instance:
                yield host_of(instance), item


def _warning(code: str, severity: str, subject: str, message: str = "", fix: str = "") -> Entry:
    """A warning as the panel lists it; an agent's ``trainwatch_warning`` carries no words
    (labels are code, severity and subject), so its message and fix stay empty."""
    return {
        "code": code,
        "severity": severity,
        "subject": subject,
        "message": message,
        "fix": fix,
    }


def _space(avail: Series, size: Series) -> dict[str, list[Entry]]:
    """Per host: every filesystem with its free share, the least free first."""
    sizes = {
        (m.get("instance"), m.get("device"), m.get("mountpoint")): _value(item)
        for item in size
        for m in [item.get("metric", {})]
    }
    out: dict[str, list[Entry]] = {}
    for item in avail:
        m = item.get("metric", {})
        total = sizes.get((m.get("instance"), m.get("device"), m.get("mountpoint")))
        free = _value(item)
        if not total or free is None or not m.get("instance"):
            continue
        out.setdefault(host_of(m["instance"]), []).append(
            {
                "mountpoint": m.get("mountpoint", ""),
                "device": m.get("device", ""),
                "fstype": m.get("fstype", ""),
                "avail_bytes": free,
                "size_bytes": total,
                "free_pct": 100.0 * free / total,
            }
        )
    for entries in out.values():
        entries.sort(key=lambda e: (e["free_pct"], e["mountpoint"]))
    return out


def _full(fs: Entry, d: Defaults) -> Entry | None:
    """disk-almost-full from node_exporter's numbers, as advice.storage judges a path."""
    total, free = fs["size_bytes"], fs["avail_bytes"]
    limit = d.full_fraction * total
    if total > d.full_bytes:  # on a tiny tmpfs "under 2 GiB" is always true
        limit = max(limit, float(d.full_bytes))
    if free > limit:  # at or under the limit, as advice.storage judges it
        return None
    severity = "critical" if free <= d.full_critical_fraction * total else "warning"
    return _warning(
        "disk-almost-full",
        severity,
        fs["mountpoint"],
        f"Only {fmt_bytes(free)} of {fmt_bytes(total)} ({fmt_pct(free / total)}) is free on "
        f"{fs['mountpoint']} ({fs['fstype']} {fs['device']}).",
        FULL_FIX,
    )


def _derived(
    host: str, results: Mapping[str, Series], space: list[Entry], d: Defaults
) -> list[Entry]:
    """Warnings for a host without our agent, from node_exporter's and DCGM's numbers."""
    out = [w for fs in space if (w := _full(fs, d)) is not None]
    for h, item in _hosts(results, ["disk_saturated"]):
        if h == host and (util := _value(item)) is not None:
            device = item["metric"].get("device", "?")
            out.append(
                _warning(
                    "disk-saturated",
                    "warning",
                    device,
                    f"Disk {device} is {util * 100:.0f} % busy with requests waiting "
                    f"{d.saturated_await_ms:g} ms or more.",
                    SATURATED_FIX,
                )
            )
    for h, item in _hosts(results, ["dcgm_stalled"]):
        if h == host:
            gpu = item["metric"].get("gpu", "?")
            out.append(
                _warning(
                    "gpu-stalled",
                    "warning",
                    f"GPU {gpu}",
                    f"GPU {gpu} holds memory but stayed under {d.gpu_idle_util_pct:g} % for "
                    f"{fmt_duration(d.gpu_stalled_for_s)}.",
                    STALLED_FIX,
                )
            )
    return out


def _busiest(host: str, results: Mapping[str, Series]) -> Entry | None:
    util: dict[str, float] = {}
    rate: dict[str, float] = {}
    for name, into in (("disk_util", util), ("disk_bytes", rate)):
        for h, item in _hosts(results, [name]):
            device, v = item["metric"].get("device"), _value(item)
            if h == host and device and v is not None:
                into[device] = max(into.get(device, 0.0), v)
    if not util:
        return None
    device = max(sorted(util), key=lambda k: util[k])
    return {"device": device, "util_pct": 100.0 * util[device], "bytes_per_s": rate.get(device)}


def _gpu(host: str, results: Mapping[str, Series]) -> Entry | None:
    """Mean utilization over the host's GPUs: our agent's numbers, else DCGM's."""
    for name, source in (("gpu", "trainwatch"), ("dcgm", "dcgm")):
        values: dict[str, float] = {}
        for h, item in _hosts(results, [name]):
            v = _value(item)
            if h == host and v is not None:
                m = item["metric"]
                values[m.get("UUID") or m.get("gpu") or str(len(values))] = v
        if values:
            return {
                "count": len(values),
                "util_pct": sum(values.values()) / len(values),
                "source": source,
            }
    return None


def _status(ups: list[bool]) -> str:
    """up (every exporter of the host answers), partial, down, or gone (no target now)."""
    if not ups:
        return "gone"
    return "up" if all(ups) else "down" if not any(ups) else "partial"


def fold(results: Mapping[str, Series], d: Defaults = DEFAULTS) -> list[Entry]:
    """One entry per host, the most urgent first (worst warning, then down, then name)."""
    hosts: dict[str, Entry] = {}

    def entry(host: str) -> Entry:
        blank = dict.fromkeys(("last_seen", "worst", "gpu", "disk", "space"))
        return hosts.setdefault(
            host, {"host": host, "name": host, "instances": [], "warnings": [], **blank}
        )

    for host, item in _hosts(results, ["up"]):
        m = item["metric"]
        e = entry(host)
        up = _value(item) == 1.0
        e["instances"].append({"instance": m["instance"], "job": m.get("job", ""), "up": up})
        if m.get("hostname"):
            e["name"] = m["hostname"]
    up_now = {i["instance"] for e in hosts.values() for i in e["instances"] if i["up"]}
    for host, item in _hosts(results, ["scraped"]):
        scraped = _value(item)
        if item["metric"]["instance"] in up_now and scraped is not None:
            e = hosts[host]
            e["last_seen"] = max(e["last_seen"] or 0.0, scraped)
    for host, item in _hosts(results, ["seen"]):
        seen = _value(item)
        if seen is not None and hosts.get(host, {}).get("last_seen") is None:
            entry(host)["last_seen"] = seen
    agents = {h for h, _ in _hosts(results, ["agent"])}
    space = _space(results.get("fs_avail", []), results.get("fs_size", []))
    for host, item in _hosts(results, ["warnings"]):
        m = item["metric"]
        entry(host)["warnings"].append(
            _warning(m.get("code", "?"), m.get("severity", "warning"), m.get("subject", ""))
        )
    for host, e in hosts.items():
        e["status"] = _status([i["up"] for i in e["instances"]])
        e["agent"] = host in agents
        e["instances"].sort(key=lambda i: i["instance"])
        if not e["agent"]:
            e["warnings"] += _derived(host, results, space.get(host, []), d)
        e["warnings"].sort(key=lambda w: (-SEVERITY_RANK.get(w["severity"], 0), w["code"]))
        e["worst"] = e["warnings"][0]["severity"] if e["warnings"] else None
        e["gpu"] = _gpu(host, results)
        e["disk"] = _busiest(host, results)
        e["space"] = space[host][0] if space.get(host) else None
    return sorted(
        hosts.values(),
        key=lambda e: (-SEVERITY_RANK.get(e["worst"] or "", 0), e["status"] == "up", e["name"]),
    )


# -- one host's charts over a window (query_range) --------------------------------------------

MIN_WINDOW_S = 60.0
MAX_WINDOW_S = 7 * 86400.0
POINTS = 240  # points per line, whatever the window: a chart is a few hundred pixels wide


def chart_specs(host: str, rate_s: float) -> list[dict[str, Any]]:
    """The charts of one host: each with its queries (the first that answers wins: our
    agent's GPU numbers, else DCGM's) and the label that names a line. ``max by`` folds
    the same device exported twice (our agent and node_exporter on one host) into one line."""
    s = host_selector(host)
    r = f"{rate_s:g}s"
    return [
        {
            "id": "gpu",
            "title": "GPU utilization",
            "unit": "%",
            "range": [0, 100],
            "label": "gpu",
            "queries": [
                f"max by (gpu) (trainwatch_gpu_utilization_percent{{{s}}})",
                f"max by (gpu) (DCGM_FI_DEV_GPU_UTIL{{{s}}})",
            ],
        },
        {
            "id": "disk_util",
            "title": "Disk busy",
            "unit": "%util",
            "range": [0, 100],
            "label": "device",
            "queries": [
                f"max by (device) (100 * rate(node_disk_io_time_seconds_total{{{s}}}[{r}]))"
            ],
        },
        {
            "id": "disk_rate",
            "title": "Disk throughput",
            "unit": "MB/s",
            "range": None,
            "label": "device",
            "queries": [
                f"max by (device) ((rate(node_disk_read_bytes_total{{{s}}}[{r}]) "
                f"+ rate(node_disk_written_bytes_total{{{s}}}[{r}])) / 1e6)"
            ],
        },
        {
            "id": "space",
            "title": "Space used",
            "unit": "% per filesystem",
            "range": [0, 100],
            "label": "mountpoint",
            "queries": [
                f"max by (mountpoint) (100 * (1 - node_filesystem_avail_bytes{{{s},{FS}}} "
                f"/ node_filesystem_size_bytes{{{s},{FS}}}))"
            ],
        },
    ]


def grid(window_s: float, now: float) -> tuple[float, float, float]:
    """(start, end, step): about ``POINTS`` points of whole seconds, the last one now (a
    step-aligned end would leave out up to a step of the newest data)."""
    step = max(1.0, math.ceil(window_s / POINTS))
    end = round(now, 3)
    return end - window_s, end, step


def chart_lines(
    spec: Mapping[str, Any], answers: list[Series], start: float, step: float, count: int
) -> dict[str, Any]:
    """One chart for the panel: lines on the shared time axis, None where no value."""
    lines = []
    answer = next((a for a in answers if a), [])
    for item in sorted(answer, key=lambda i: str(i.get("metric", {}).get(spec["label"], ""))):
        values: list[float | None] = [None] * count
        for t, v in item.get("values", []):
            i = round((float(t) - start) / step)
            number = float(v)
            if 0 <= i < count and math.isfinite(number):
                values[i] = number
        label = str(item.get("metric", {}).get(spec["label"], "")) or spec["title"]
        if spec["id"] == "gpu":
            label = f"GPU {label}"
        lines.append({"label": label, "values": values})
    return {k: spec[k] for k in ("id", "title", "unit", "range")} | {"series": lines}
