"""The fleet, read back from Prometheus: the PromQL behind the panel's Fleet section, and the
answers folded into one entry per host.

Pure functions over Prometheus's HTTP API answers (``data.result`` lists); the server does
the HTTP and runs the fold off the event loop. Every number a row shows is computed here,
once.

Why by host and not by instance: a node commonly runs node_exporter (:9100), DCGM exporter
(:9400) and our agent, three instances of one machine. The host is the instance without its
port; its name is the ``hostname`` label our agents' file_sd targets carry, else the host.
Prometheus does that folding (prometheus.rules.fleet: ``max by (host, ...)``, ``topk by``),
so every answer holds one series per host, or per host and device where a row names the
device (a host's filesystems: the fold picks the least free and the almost full); the fold
here is one pass over each answer (linear in the series returned), whatever the number of
disks and GPUs behind them.

Hosts with only node_exporter and DCGM exporter get the warnings those numbers allow
(``disk-almost-full`` from filesystem avail/size, ``disk-saturated`` from io time and await,
``gpu-stalled`` from ``DCGM_FI_DEV_GPU_UTIL`` with memory held), with our thresholds, decided
by the PromQL for disks and GPUs (only the flagged ones come back) and here for filesystems
(``almost_full``, the recording rule's test in Python); a host that runs our
agent gets the agent's own warnings (``trainwatch_warning``), which see more (mounts, probes,
fill trends) and are never doubled by these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ..advice.text import fmt_bytes, fmt_duration, fmt_pct
from ..core.defaults import DEFAULTS, Defaults
from .rules.fleet import FS, host_series
from .rules.storage import FULL_FIX, SATURATED_FIX

Series = list[dict[str, Any]]  # Prometheus's result: [{"metric": {...}, "value": [t, "v"]}]
Entry = dict[str, Any]

LOOKBACK = "1h"  # a host seen within this is listed, as "gone" once no target names it
SEEN_STEP = "15s"
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}
STATES = ("critical", "warning", "down", "ok")  # a host's state, in the panel's counts
HOST_RE = re.compile(r"[A-Za-z0-9._\-:\[\]%]{1,255}")  # fullmatch only (issue 24)
STALLED_FIX = (
    "The GPU holds memory but computes nothing: look at where the training loop waits "
    "(py-spy dump --pid PID); a loop blocked on logs or checkpoints on a network share "
    "should write them to local disk (trainwatch_lab.fix.local_mirror)."
)
# the fix of each warning derived from node_exporter's and DCGM's numbers, by code: the
# listing sends it once (``fixes``), not with each of a thousand hosts' warnings
FIXES = {
    "disk-almost-full": FULL_FIX,
    "disk-saturated": SATURATED_FIX,
    "gpu-stalled": STALLED_FIX,
}


def instant_queries(
    rate_window: str, d: Defaults = DEFAULTS, recorded: Collection[str] = ()
) -> dict[str, str]:
    """Every query of one fleet listing, by name; each answers for all hosts at once, with
    one series per host (per instance for ``up``, per flagged device for warnings). A
    building block Prometheus records already (``recorded``: the names of
    prometheus.rules.fleet's recording rules it has) is read, not computed again: at 10,000
    hosts computing them costs seconds, reading them milliseconds."""
    r = rate_window
    series = host_series(rate_window, d, recorded)

    def s(name: str) -> str:
        return name if name in recorded else series[name]

    busiest = (
        f"topk by (host) (1, {s(f'trainwatch:host_device:node_disk_io_time_seconds:rate{r}')})"
    )
    return {
        # per target: the host is its instance without the port (host_of), as by_host says
        "up": "max by (instance, job, hostname) (up)",
        "scraped": "max by (instance) (timestamp(up))",  # when each was last scraped
        "absent": ABSENT,  # targets seen within LOOKBACK that do not answer now
        "agent": "count by (instance) (trainwatch_sample_timestamp_seconds)",
        "warnings": "max by (instance, code, severity, subject) (trainwatch_warning)",
        "gpu": s("trainwatch:host:trainwatch_gpu_utilization_percent:avg"),
        "gpu_count": s("trainwatch:host:trainwatch_gpu_utilization_percent:count"),
        "dcgm": s("trainwatch:host:dcgm_fi_dev_gpu_util:avg"),
        "dcgm_count": s("trainwatch:host:dcgm_fi_dev_gpu_util:count"),
        "dcgm_stalled": s("trainwatch:host_gpu:dcgm_stalled:max"),
        "disk_util": busiest,
        # every disk's and filesystem's, joined here: an `and on(...)` with the busiest or
        # the least free costs Prometheus more than sending them all, even recorded (at
        # 10,000 hosts every disk's throughput: 0.9 s for 5.6 MB; only the busiest disks'
        # through `and on(host, device)` with a topk or a max: 1.1-1.4 s for 1.4-1.7 MB);
        # the join here costs milliseconds
        "disk_bytes": s(f"trainwatch:host_device:node_disk_bytes:rate{r}"),
        "disk_saturated": s(f"trainwatch:host_device:node_disk_saturated:rate{r}"),
        # every filesystem's free and total bytes: the least free and the almost full are
        # found in the fold (one pass), where asking Prometheus for them computed the free
        # bytes three times and the sizes four (two thirds of its time at 1000 hosts inline)
        "fs_avail": s("trainwatch:host_fs:node_filesystem_avail_bytes:max"),
        "fs_size": s("trainwatch:host_fs:node_filesystem_size_bytes:max"),
    }


ABSENT = f"group by (instance) (last_over_time(up[{LOOKBACK}])) unless on(instance) up == 1"


def seen_query(absent: Series) -> str | None:
    """When each target of the ``absent`` answer last answered (a second round, for the few
    targets down or gone: the subquery over every target would cost seconds at 10,000
    hosts); None when there is none."""
    instances = sorted({i for item in absent if (i := item.get("metric", {}).get("instance"))})
    if not instances:
        return None
    pattern = "|".join(re.escape(i) for i in instances)
    return (
        f"max by (instance) (max_over_time(timestamp(up{{instance=~`{pattern}`}} == 1)"
        f"[{LOOKBACK}:{SEEN_STEP}]))"
    )


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


def _hosts(results: Mapping[str, Series], name: str) -> Iterable[tuple[str, dict[str, str], Any]]:
    """(host, labels, value) of every series of one answer: the ``host`` label Prometheus
    made, else the instance without its port."""
    for item in results.get(name, ()):
        m = item.get("metric", {})
        host = m.get("host") or (host_of(m["instance"]) if m.get("instance") else None)
        if host:
            yield host, m, _value(item)


def _warning(code: str, severity: str, subject: str, message: str = "") -> Entry:
    """A warning as the panel lists it; an agent's ``trainwatch_warning`` carries no words
    (labels are code, severity and subject), so its message stays empty. The fix of a
    warning derived here is the same for every host: ``FIXES``, once per listing."""
    return {"code": code, "severity": severity, "subject": subject, "message": message}


def _space(results: Mapping[str, Series]) -> dict[str, list[Entry]]:
    """Per host: its filesystems (free bytes from ``fs_avail``, size from ``fs_size``),
    least free first."""
    key = ("device", "mountpoint")
    sizes = {(h, *(m.get(k) for k in key)): v for h, m, v in _hosts(results, "fs_size")}
    out: dict[str, list[Entry]] = {}
    for host, m, free in _hosts(results, "fs_avail"):
        total = sizes.get((host, *(m.get(k) for k in key)))
        if not total or free is None:
            continue
        out.setdefault(host, []).append(
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


def almost_full(fs: Entry, d: Defaults) -> bool:
    """Whether a filesystem is almost full, as advice.storage judges a path and as the
    ``...:almost_full`` recording rule (prometheus.rules.fleet) selects: 10 % or less free,
    or 2 GiB or less on a filesystem larger than that."""
    total, free = fs["size_bytes"], fs["avail_bytes"]
    return free <= d.full_fraction * total or (free <= d.full_bytes and total > d.full_bytes)


def _full(fs: Entry, d: Defaults) -> Entry:
    """disk-almost-full from node_exporter's numbers, for a filesystem ``almost_full``."""
    total, free = fs["size_bytes"], fs["avail_bytes"]
    # at or under the limit, as advice.storage judges it (the PromQL's <=)
    severity = "critical" if free <= d.full_critical_fraction * total else "warning"
    return _warning(
        "disk-almost-full",
        severity,
        fs["mountpoint"],
        f"Only {fmt_bytes(free)} of {fmt_bytes(total)} ({fmt_pct(free / total)}) is free on "
        f"{fs['mountpoint']} ({fs['fstype']} {fs['device']}).",
    )


def _derived(
    results: Mapping[str, Series], space: Mapping[str, list[Entry]], d: Defaults
) -> dict[str, list[Entry]]:
    """Per host: the warnings node_exporter's and DCGM's numbers allow (for hosts without
    our agent; the caller drops the others); ``space``: every host's filesystems."""
    out: dict[str, list[Entry]] = {}
    for host, filesystems in space.items():
        full = [_full(fs, d) for fs in filesystems if almost_full(fs, d)]
        if full:
            out[host] = full
    for host, m, util in _hosts(results, "disk_saturated"):
        if util is not None:
            device = m.get("device", "?")
            out.setdefault(host, []).append(
                _warning(
                    "disk-saturated",
                    "warning",
                    device,
                    f"Disk {device} is {util * 100:.0f} % busy with requests waiting "
                    f"{d.saturated_await_ms:g} ms or more.",
                )
            )
    for host, m, _ in _hosts(results, "dcgm_stalled"):
        gpu = m.get("gpu", "?")
        out.setdefault(host, []).append(
            _warning(
                "gpu-stalled",
                "warning",
                f"GPU {gpu}",
                f"GPU {gpu} holds memory but stayed under {d.gpu_idle_util_pct:g} % for "
                f"{fmt_duration(d.gpu_stalled_for_s)}.",
            )
        )
    return out


def _busiest(results: Mapping[str, Series]) -> dict[str, Entry]:
    """Per host: its busiest disk (topk by host) and that disk's throughput."""
    rates = {(h, m.get("device")): v for h, m, v in _hosts(results, "disk_bytes")}
    best: dict[str, tuple[float, str]] = {}
    for host, m, util in _hosts(results, "disk_util"):
        device = m.get("device")
        if device and util is not None and (-util, device) < best.get(host, (1.0, "")):
            best[host] = (-util, device)
    out: dict[str, Entry] = {}
    for host, (neg, device) in best.items():
        rate = rates.get((host, device))
        out[host] = {
            "device": device,
            "util_pct": _pct(-100.0 * neg),
            "bytes_per_s": None if rate is None else round(rate),
        }
    return out


def _pct(value: float) -> float:
    """A percentage as the listing sends it: to 0.01 (the panel shows whole percents, and
    a tenth under 10 % free), not 30.000000000000004."""
    return round(value, 2)


def _gpus(results: Mapping[str, Series]) -> dict[str, Entry]:
    """Per host: mean utilization over its GPUs, our agent's numbers, else DCGM's."""
    out: dict[str, Entry] = {}
    for name in ("dcgm", "gpu"):  # ours wins: last
        counts = {h: v for h, _, v in _hosts(results, f"{name}_count")}
        for host, _, util in _hosts(results, name):
            if util is not None:
                out[host] = {"count": int(counts.get(host) or 1), "util_pct": _pct(util)}
    return out


def _least_free(fs: Entry) -> Entry:
    """The least free filesystem as a row shows it: where, how much free, what share."""
    return {
        "mountpoint": fs["mountpoint"],
        "avail_bytes": round(fs["avail_bytes"]),
        "free_pct": _pct(fs["free_pct"]),
    }


def _status(ups: list[bool]) -> str:
    """up (every exporter of the host answers), partial, down, or gone (no target now)."""
    if not ups:
        return "gone"
    return "up" if all(ups) else "down" if not any(ups) else "partial"


def state(entry: Mapping[str, Any]) -> str:
    """The host's line in the panel's counts: its worst warning, else down (no exporter of
    it answers), else ok."""
    if entry["worst"] in ("critical", "warning"):
        return str(entry["worst"])
    return "down" if entry["status"] in ("down", "gone") else "ok"


def counts(hosts: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Hosts per state, every state named (``{"critical": 2, ..., "ok": 984}``)."""
    out = dict.fromkeys(STATES, 0)
    for e in hosts:
        out[e["state"]] += 1
    return out


def fold(results: Mapping[str, Series], d: Defaults = DEFAULTS) -> list[Entry]:
    """One entry per host, the most urgent first (worst warning, then down, then name). One
    pass over each answer: linear in the series returned."""
    hosts: dict[str, Entry] = {}

    def entry(host: str) -> Entry:
        blank = dict.fromkeys(("last_seen", "worst", "gpu", "disk", "space"))
        return hosts.setdefault(
            host, {"host": host, "name": host, "instances": [], "warnings": [], **blank}
        )

    for host, m, v in _hosts(results, "up"):
        e = entry(host)
        e["instances"].append({"instance": m["instance"], "job": m.get("job", ""), "up": v == 1.0})
        if m.get("hostname"):
            e["name"] = m["hostname"]
    host_by_up = {i["instance"]: h for h, e in hosts.items() for i in e["instances"] if i["up"]}
    for _, m, scraped in _hosts(results, "scraped"):
        host = host_by_up.get(m.get("instance", ""))
        if host is not None and scraped is not None:
            e = hosts[host]
            e["last_seen"] = max(e["last_seen"] or 0.0, scraped)
    for host, _, seen in _hosts(results, "seen"):
        if seen is not None and hosts.get(host, {}).get("last_seen") is None:
            entry(host)["last_seen"] = seen
    agents = {h for h, _, _ in _hosts(results, "agent")}
    for host, m, _ in _hosts(results, "warnings"):
        entry(host)["warnings"].append(
            _warning(m.get("code", "?"), m.get("severity", "warning"), m.get("subject", ""))
        )
    space = _space(results)
    derived, gpus, disks = _derived(results, space, d), _gpus(results), _busiest(results)
    for host, e in hosts.items():
        e["status"] = _status([i["up"] for i in e["instances"]])
        e["agent"] = host in agents
        e["instances"].sort(key=lambda i: i["instance"])
        if not e["agent"]:
            e["warnings"] += derived.get(host, [])
        e["warnings"].sort(key=lambda w: (-SEVERITY_RANK.get(w["severity"], 0), w["code"]))
        e["worst"] = e["warnings"][0]["severity"] if e["warnings"] else None
        e["state"] = state(e)
        e["gpu"] = gpus.get(host)
        e["disk"] = disks.get(host)
        e["space"] = _least_free(space[host][0]) if space.get(host) else None
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
