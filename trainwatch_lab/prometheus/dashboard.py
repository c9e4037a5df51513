"""A Grafana dashboard for the fleet: ``trainwatch-lab dashboard`` prints it (JSON, imported
with Grafana's Dashboards > New > Import).

It reads what the panel's Fleet section reads: the per-host recording rules that
``trainwatch-lab rules`` ships (prometheus.rules.fleet, same ``--rate-window``), the agents'
``trainwatch_*`` series and node_exporter's and DCGM exporter's. Per-host verdicts (hosts per
state, the active warnings), the storage tax (what a write + fsync costs on each watched
path, how busy the busiest disk is), fill and time to full, and GPU stalls. Two variables:
the Prometheus data source and the hosts shown (``$host``, every host by default).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from .rules.fleet import by_host
from .rules.ruleset import check_window

Panel = dict[str, Any]
SOURCE = {"type": "prometheus", "uid": "${datasource}"}
H = '{host=~"$host"}'
WIDTH = 24  # Grafana's grid is 24 columns wide


def _target(expr: str, legend: str = "", instant: bool = False, ref: str = "A") -> dict[str, Any]:
    target: dict[str, Any] = {"refId": ref, "datasource": SOURCE, "expr": expr}
    if legend:
        target["legendFormat"] = legend
    if instant:
        target |= {"instant": True, "range": False, "format": "table"}
    return target


def _panel(kind: str, title: str, targets: list[dict[str, Any]], unit: str, **more: Any) -> Panel:
    defaults: dict[str, Any] = {"unit": unit}
    if "max" in more:
        defaults |= {"min": 0, "max": more.pop("max")}
    if "thresholds" in more:
        defaults["thresholds"] = {"mode": "absolute", "steps": more.pop("thresholds")}
        defaults["color"] = {"mode": "thresholds"}
    return {
        "type": kind,
        "title": title,
        "description": more.pop("description", ""),
        "datasource": SOURCE,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": more.pop("options", {}),
        **more,
    }


def _count(title: str, expr: str, color: str) -> Panel:
    steps = [{"color": "green", "value": None}, {"color": color, "value": 1}]
    return _panel(
        "stat",
        title,
        [_target(f"count({expr}) or vector(0)")],
        "none",
        thresholds=steps,
        options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"},
    )


def on_hosts(metric: str) -> str:
    """A raw series of the hosts chosen in ``$host``, with a ``host`` label (its instance
    without the port: Grafana writes a multi-value ``$host`` as ``(a|b)``, All as ``.*``)."""
    return by_host(f'{metric}{{instance=~"($host)(:[0-9]+)?"}}')


def panels(rate_window: str = "1m", d: Defaults = DEFAULTS) -> list[Panel]:
    """Every panel, in reading order (without ids and positions; ``dashboard`` adds them)."""
    r = rate_window
    severity = f"trainwatch:host:warning_severity:max{H}"
    by_mount = "{{host}} {{mountpoint}}"
    return [
        _count("Hosts with a critical warning", f"{severity} == 3", "red"),
        _count("Hosts with a warning", f"{severity} == 2", "orange"),
        _count("Hosts down", f"trainwatch:host:up:min{H} == 0", "orange"),
        _count("Hosts", f"trainwatch:host:up:min{H}", "green"),
        _panel(
            "table",
            "Active warnings, per host",
            [
                _target(
                    f"max by (host, code, severity, subject) ({on_hosts('trainwatch_warning')})",
                    instant=True,
                )
            ],
            "none",
            description="The agents' warnings (trainwatch_warning): code, severity, subject.",
        ),
        _panel(
            "timeseries",
            "GPU utilization per host",
            [
                _target(
                    f"trainwatch:host:trainwatch_gpu_utilization_percent:avg{H} "
                    f"or trainwatch:host:dcgm_fi_dev_gpu_util:avg{H}",
                    "{{host}}",
                )
            ],
            "percent",
            max=100,
            description="Mean over the host's GPUs: our agent's numbers, else DCGM exporter's.",
        ),
        _panel(
            "timeseries",
            "GPU stalls: memory held at 0 %",
            [
                _target(
                    f"trainwatch:host_gpu:dcgm_stalled:max{H} or max by (host, gpu) "
                    f"({on_hosts('trainwatch_gpu_utilization_percent')} < {d.gpu_idle_util_pct:g} "
                    f"and on(instance, gpu) trainwatch_gpu_process_memory_bytes > 0)",
                    "{{host}} GPU {{gpu}}",
                )
            ],
            "percent",
            description=(
                f"GPUs under {d.gpu_idle_util_pct:g} % while they hold memory (DCGM over "
                f"{d.gpu_stalled_for_s:g} s; our agent: the watched job's memory)."
            ),
        ),
        _panel(
            "timeseries",
            "Storage tax: a write + fsync on each watched path (p99)",
            [_target(on_hosts("trainwatch_probe_p99_seconds"), "{{host}} {{path}}")],
            "s",
            description=(
                "What every checkpoint or log write pays: the agents' probe of the watched "
                f"paths (slow-mount at a median of {d.slow_p50_ms:g} ms or more)."
            ),
        ),
        _panel(
            "timeseries",
            "Busiest disk per host",
            [
                _target(
                    "100 * max by (host) "
                    f"(trainwatch:host_device:node_disk_io_time_seconds:rate{r}{H})",
                    "{{host}}",
                )
            ],
            "percent",
            max=100,
            description=f"disk-saturated from {d.saturated_util_pct:g} %util, with await.",
        ),
        _panel(
            "timeseries",
            "Least free filesystem per host",
            [
                _target(
                    f"100 * min by (host) (trainwatch:host_fs:node_filesystem_free:ratio{H})",
                    "{{host}}",
                )
            ],
            "percent",
            max=100,
            description=f"disk-almost-full under {d.full_fraction * 100:g} % free.",
        ),
        _panel(
            "timeseries",
            "Time to full (filesystems filling now)",
            [_target(on_hosts("trainwatch_filesystem_seconds_to_full"), by_mount)],
            "s",
            description=(
                f"disk-filling under {d.fill_horizon_s:g} s at the current rate, critical "
                f"under {d.fill_critical_s:g} s."
            ),
        ),
        _panel(
            "timeseries",
            "Fill rate",
            [_target(on_hosts("trainwatch_filesystem_fill_rate_bytes_per_second"), by_mount)],
            "Bps",
            description="How fast free space shrinks (0 when steady).",
        ),
    ]


def dashboard(rate_window: str = "1m", d: Defaults = DEFAULTS) -> dict[str, Any]:
    """The dashboard: panels laid out on Grafana's grid (stats four a row, charts two)."""
    check_window(rate_window)
    laid: list[Panel] = []
    x = y = row_h = 0
    for i, panel in enumerate(panels(rate_window, d), start=1):
        w, h = (
            (6, 4) if panel["type"] == "stat" else (24, 8) if panel["type"] == "table" else (12, 8)
        )
        if x + w > WIDTH:
            x, y = 0, y + row_h
        laid.append({"id": i, "gridPos": {"h": h, "w": w, "x": x, "y": y}, **panel})
        x, row_h = x + w, h
    host = {
        "name": "host",
        "label": "Host",
        "type": "query",
        "datasource": SOURCE,
        "query": {"query": "label_values(trainwatch:host:up:min, host)", "refId": "hosts"},
        "definition": "label_values(trainwatch:host:up:min, host)",
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
        "sort": 1,
    }
    source = {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
    }
    return {
        "title": "trainwatch: the fleet",
        "uid": "trainwatch-fleet",
        "description": "Per-host verdicts, storage tax, fill and time to full, GPU stalls "
        "(trainwatch-lab dashboard; needs the recording rules of trainwatch-lab rules).",
        "tags": ["trainwatch", "storage", "gpu"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [source, host]},
        "panels": laid,
    }


def dashboard_json(rate_window: str = "1m", d: Defaults = DEFAULTS) -> str:
    """What ``trainwatch-lab dashboard`` prints."""
    return json.dumps(dashboard(rate_window, d), indent=2, ensure_ascii=False) + "\n"
