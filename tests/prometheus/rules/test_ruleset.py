"""prometheus.rules.ruleset: the alerting rules pass ``promtool check rules`` and
``promtool test rules`` (every alert once firing, once not), and their thresholds come from
the defaults."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prometheus.conftest import ROOT, env
from tests.support.env import need_tool
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.prometheus.rules.fleet import recording_rules
from trainwatch_lab.prometheus.rules.ruleset import alert_rules, rules_yaml

CODES = {
    "mount-unresponsive",
    "shared-mount",
    "slow-mount",
    "disk-almost-full",
    "disk-filling",
    "disk-saturated",
    "checkpoint-wont-fit",
    "gpu-stalled",
    "gpu-starved",
    "gpu-unavailable",
}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in {"job": "tw", **labels}.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def path_info(instance: str, path: str, mountpoint: str, **extra: str) -> dict[str, str]:
    labels = {"instance": instance, "path": path, "mountpoint": mountpoint, "fstype": "nfs4"}
    labels |= {"kind": "shared", "verdict": "ok", "shared": "false", "device": ""} | extra
    return series("trainwatch_path_info", "1x300", **labels)


def filesystem(
    instance: str,
    mountpoint: str,
    size: float,
    avail: float,
    files: float = 1e6,
    files_free: float = 5e5,
) -> list[dict[str, str]]:
    fs = {
        "instance": instance,
        "device": f"srv:{mountpoint}",
        "mountpoint": mountpoint,
        "fstype": "nfs4",
    }
    return [
        series("node_filesystem_size_bytes", f"{size:g}x300", **fs),
        series("node_filesystem_avail_bytes", f"{avail:g}x300", **fs),
        series("node_filesystem_free_bytes", f"{avail:g}x300", **fs),  # no root reserve
        series("node_filesystem_files", f"{files:g}x300", **fs),
        series("node_filesystem_files_free", f"{files_free:g}x300", **fs),
        series("node_filesystem_readonly", "0x300", **fs),
        path_info(instance, f"{mountpoint}/runs", mountpoint),
    ]


def fill(instance: str, mountpoint: str, ttf: float, trend: float, points: int) -> list[Any]:
    fs = {"instance": instance, "device": "tmpfs", "mountpoint": mountpoint, "fstype": "tmpfs"}
    return [
        series("trainwatch_filesystem_seconds_to_full", f"{ttf:g}x300", **fs),
        series("trainwatch_filesystem_fill_trend_seconds", f"{trend:g}x300", **fs),
        series("trainwatch_filesystem_fill_points", f"{points}x300", **fs),
    ]


def disk(instance: str, device: str, busy: float, read_s: float) -> list[dict[str, str]]:
    """Counters growing by ``busy`` s of I/O time and ``read_s`` s of read time per second,
    one read per second (so the read await is ``read_s`` seconds)."""
    d = {"instance": instance, "device": device}
    return [
        series("node_disk_io_time_seconds_total", f"0+{busy:g}x300", **d),
        series("node_disk_read_time_seconds_total", f"0+{read_s:g}x300", **d),
        series("node_disk_reads_completed_total", "0+1x300", **d),
        series("node_disk_write_time_seconds_total", "0x300", **d),
        series("node_disk_writes_completed_total", "0x300", **d),
        path_info(instance, f"/data-{device}", "/", device=device),
    ]


def gpu(instance: str, util: str, process_mem: float) -> list[dict[str, str]]:
    g = {"instance": instance, "gpu": "0", "UUID": f"GPU-{instance}", "modelName": "H200"}
    return [
        series("trainwatch_gpu_utilization_percent", util, **g),
        series("trainwatch_gpu_process_memory_bytes", f"{process_mem:g}x300", **g),
    ]


def starved_evidence(instance: str) -> dict[str, str]:
    """The agent's own gpu-starved: its reads are most of the device's, waited on."""
    return series("trainwatch_warning", "1x300", instance=instance, code="gpu-starved",
                  severity="warning", subject="GPU 0")  # fmt: skip


def case(
    name: str,
    inputs: list[Any],
    eval_time: str,
    fires: list[dict[str, str]],
    value: str = "",
    quiet_at: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One alert: its input series, and the labels (and ``$value`` as the annotation
    templates print it) of each alert expected to fire at ``eval_time``; the others must
    not. At each of ``quiet_at`` (before a ``for:`` has passed) none fires yet."""
    return {
        "alert": name,
        "inputs": inputs,
        "at": eval_time,
        "fires": fires,
        "value": value,
        "quiet_at": quiet_at,
    }


def fs_labels(instance: str, mountpoint: str, fstype: str = "nfs4") -> dict[str, str]:
    device = f"srv:{mountpoint}" if fstype == "nfs4" else "tmpfs"
    return {
        "instance": instance,
        "job": "tw",
        "device": device,
        "mountpoint": mountpoint,
        "fstype": fstype,
    }


def info_labels(instance: str, path: str, **extra: str) -> dict[str, str]:
    labels = {
        "instance": instance,
        "job": "tw",
        "path": path,
        "mountpoint": "/mnt",
        "fstype": "nfs4",
        "kind": "shared",
        "verdict": "ok",
        "shared": "false",
        "device": "",
    }
    return labels | extra


CASES = [
    case(
        "TrainwatchMountUnresponsive",
        [
            path_info("a", "/mnt/x", "/mnt", verdict="unresponsive"),
            path_info("b", "/mnt/x", "/mnt"),
        ],
        "5s",
        [info_labels("a", "/mnt/x", verdict="unresponsive")],
    ),
    case(
        "TrainwatchSharedMount",
        [
            path_info("a", "/mnt/x", "/mnt", shared="true", verdict="shared"),
            path_info("b", "/mnt/x", "/mnt"),
            path_info("c", "/mnt/x", "/mnt", shared="true", verdict="unresponsive"),
        ],
        "5s",
        [info_labels("a", "/mnt/x", shared="true", verdict="shared")],
    ),
    case(
        "TrainwatchSlowMount",
        [
            path_info("a", "/mnt/x", "/mnt", shared="true", verdict="slow"),
            series("trainwatch_probe_p50_seconds", "0.025x300", instance="a", path="/mnt/x"),
            path_info("b", "/mnt/x", "/mnt", shared="true", verdict="shared"),
            series("trainwatch_probe_p50_seconds", "0.002x300", instance="b", path="/mnt/x"),
        ],
        "5s",
        [info_labels("a", "/mnt/x", shared="true", verdict="slow")],
        "25ms",
    ),
    case(
        "TrainwatchDiskAlmostFull",
        [
            *filesystem("a", "/w", 100e9, 5e9),  # 5 % free: warning
            *filesystem("b", "/w", 100e9, 50e9),  # plenty
            *filesystem("c", "/w", 1e9, 0.15e9),  # 15 % of a tiny disk: "under 2 GiB" is moot
            *filesystem("d", "/w", 100e9, 0.5e9),  # 0.5 %: critical, and only critical
            *filesystem("e", "/w", 100e9, 50e9, files=1000, files_free=5),  # inodes: critical
        ],
        "5s",
        [
            fs_labels("a", "/w") | {"severity": "warning", "value": "5%"},
            fs_labels("d", "/w") | {"severity": "critical", "value": "0.5%"},
            fs_labels("e", "/w") | {"severity": "critical", "value": "50%"},
        ],
    ),
    case(
        "TrainwatchDiskFilling",
        [
            *fill("a", "/t", ttf=1200, trend=40, points=10),  # warning
            *fill("b", "/t", ttf=300, trend=30, points=10),  # critical: needs 30 s, has it
            *fill("c", "/t", ttf=1200, trend=10, points=10),  # too short a trend for 20 min
            *fill("d", "/t", ttf=5000, trend=600, points=10),  # beyond the 1 h horizon
            *fill("e", "/t", ttf=100, trend=60, points=3),  # too few readings
        ],
        "5s",
        [
            fs_labels("a", "/t", "tmpfs") | {"severity": "warning", "value": "20m 0s"},
            fs_labels("b", "/t", "tmpfs") | {"severity": "critical", "value": "5m 0s"},
        ],
    ),
    case(
        "TrainwatchDiskSaturated",
        [*disk("a", "sdb", busy=0.9, read_s=0.02), *disk("b", "sdb", busy=0.9, read_s=0.001)],
        "2m",
        [{"instance": "a", "job": "tw", "device": "sdb", "value": "90%"}],
        quiet_at=("5s",),  # saturated from the second sample on, but not for 10 s yet
    ),
    case(
        "TrainwatchCheckpointWontFit",
        [
            *filesystem("a", "/c", 100e9, 5e9),
            series("trainwatch_checkpoint_newest_bytes", "1e10x300", instance="a", path="/c/runs"),
            *filesystem("b", "/c", 100e9, 50e9),
            series("trainwatch_checkpoint_newest_bytes", "1e10x300", instance="b", path="/c/runs"),
        ],
        "5s",
        [{"instance": "a", "job": "tw", "path": "/c/runs", "value": "9.313Gi"}],
    ),
    case(
        "TrainwatchGpuStalled",
        [*gpu("a", "2x300", 1e9), *gpu("b", "2x300", 0)],
        "40s",
        [{"instance": "a", "job": "tw", "gpu": "0", "UUID": "GPU-a", "modelName": "H200"}],
        quiet_at=("20s",),  # idle, but not for 30 s yet
    ),
    case(
        "TrainwatchGpuStarved",
        [
            *gpu("a", " ".join(["10 70"] * 150), 1e9),
            *disk("a", "sdb", busy=0.7, read_s=0.001),
            starved_evidence("a"),
            *gpu("b", " ".join(["10 70"] * 150), 1e9),  # the same GPU, but an idle disk
            *disk("b", "sdb", busy=0.1, read_s=0.001),
            starved_evidence("b"),
            # the same GPU and a busy disk, but the job's loaders hardly wait on it (another
            # job's reads, or a CPU-bound decode): the agent saw no evidence, no alert
            *gpu("c", " ".join(["10 70"] * 150), 1e9),
            *disk("c", "sdb", busy=0.7, read_s=0.001),
        ],
        "2m",
        [{"instance": "a", "job": "tw", "gpu": "0", "UUID": "GPU-a", "modelName": "H200"}],
    ),
    case(
        "TrainwatchGpuUnavailable",
        [
            series(
                "trainwatch_warning",
                "1x300",
                instance="a",
                code="gpu-unavailable",
                severity="info",
                subject="gpu",
            ),
            series(
                "trainwatch_warning",
                "1x300",
                instance="b",
                code="shared-mount",
                severity="warning",
                subject="/x",
            ),
        ],
        "5s",
        [{"instance": "a", "job": "tw"}],
    ),
]


# -- GPU health (issue 16, item 8) ------------------------------------------------------------
def throttled_gpu(instance: str, util: float, reason: str) -> list[dict[str, str]]:
    """A GPU ``util`` % busy with one clock-event ``reason`` holding the whole time."""
    g = {"instance": instance, "gpu": "0", "UUID": f"GPU-{instance}", "modelName": "H200"}
    return [
        series("trainwatch_gpu_utilization_percent", f"{util:g}x300", **g),
        series("trainwatch_gpu_clock_event_reason", "1x300", **g, reason=reason),
    ]


def health_cases() -> list[dict[str, Any]]:
    """gpu-throttled: thermal is a warning, the power cap alone info, an idle GPU nothing;
    gpu-error: the agent's verdict."""
    labels = {"job": "tw", "gpu": "0", "modelName": "H200"}
    error = {"code": "gpu-error", "severity": "critical", "subject": "GPU 0"}
    return [
        case(
            "TrainwatchGpuThrottled",
            [
                *throttled_gpu("a", 95, "hw_thermal"),
                *throttled_gpu("b", 95, "sw_power_cap"),
                *throttled_gpu("c", 3, "hw_thermal"),  # idle: lowering clocks is no news
            ],
            "2m",
            [
                {"instance": "a", "UUID": "GPU-a", "severity": "warning"} | labels,
                {"instance": "b", "UUID": "GPU-b", "severity": "info"} | labels,
            ],
            quiet_at=("30s",),  # held, but not for a minute yet
        ),
        case(
            "TrainwatchGpuError",
            [
                series("trainwatch_warning", "1x300", instance="a", **error),
                series("trainwatch_warning", "0x300", instance="b", **error),
            ],
            "5s",
            [{"instance": "a", "job": "tw", "subject": "GPU 0"}],
        ),
    ]


CODES.update({"gpu-throttled", "gpu-error"})
CASES.extend(health_cases())


# -- the training loop (issues 15 and 16) -----------------------------------------------------
def loop_cases() -> list[dict[str, Any]]:
    """io-bound at the agent's severity (the warning and the info rule each fire for their
    own); input-cpu-bound; a warning that cleared (0) fires nothing."""
    io = {"code": "io-bound", "subject": "/mnt/share/runs"}
    cpu = {"code": "input-cpu-bound", "severity": "info", "subject": "GPU 0"}
    return [
        case(
            "TrainwatchIoBound",
            [
                series("trainwatch_warning", "1x300", instance="a", severity="warning", **io),
                series("trainwatch_warning", "1x300", instance="b", severity="info", **io),
                series("trainwatch_warning", "0x300", instance="c", severity="warning", **io),
            ],
            "5s",
            [
                {"instance": "a", "job": "tw", "subject": io["subject"], "severity": "warning"},
                {"instance": "b", "job": "tw", "subject": io["subject"], "severity": "info"},
            ],
        ),
        case(
            "TrainwatchInputCpuBound",
            [
                series("trainwatch_warning", "1x300", instance="a", **cpu),
                series("trainwatch_warning", "0x300", instance="b", **cpu),
            ],
            "5s",
            [{"instance": "a", "job": "tw", "subject": "GPU 0"}],
        ),
    ]


CODES.update({"io-bound", "input-cpu-bound"})
CASES.extend(loop_cases())


def test_gpu_health_rules_follow_the_defaults() -> None:
    other = dataclasses.replace(DEFAULTS, gpu_throttled_for_s=120.0, gpu_throttled_busy_pct=80.0)
    text = rules_yaml(other)
    assert "trainwatch_gpu_utilization_percent >= 80" in text and "for: 120s" in text
    assert [r["labels"]["severity"] for r in alert_rules() if r["alert"].endswith("Throttled")] == [
        "warning",
        "info",
    ]


def render(template: str, labels: dict[str, str], value: str) -> str:
    """What Prometheus's template makes of an annotation, for the few constructs we use."""
    text = re.sub(
        r'\{\{ if eq \$labels\.(\w+) "([^"]*)" \}\}(.*?)\{\{ else \}\}(.*?)\{\{ end \}\}',
        lambda m: m.group(3) if labels.get(m.group(1)) == m.group(2) else m.group(4),
        template,
    )
    text = re.sub(r"\{\{ \$value \| \w+ \}\}", value, text)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)


def expected(rule: dict[str, Any], fired: dict[str, str], value: str) -> dict[str, Any]:
    fired = dict(fired)
    value = fired.pop("value", value)
    severity = fired.pop("severity", rule["labels"]["severity"])
    labels = {k: v for k, v in fired.items() if v}  # an empty label is no label
    labels |= {"code": rule["labels"]["code"], "severity": severity}
    labels["subject"] = render(rule["labels"]["subject"], labels, value)
    notes = {k: render(v, labels, value) for k, v in rule["annotations"].items()}
    return {"exp_labels": labels, "exp_annotations": notes}


def unit_tests(rules: list[dict[str, Any]]) -> dict[str, Any]:
    tests = []
    for c in CASES:
        mine = [r for r in rules if r["alert"] == c["alert"]]
        exp = []
        for fired in c["fires"]:
            severity = fired.get("severity", mine[0]["labels"]["severity"])
            rule = next(r for r in mine if r["labels"]["severity"] == severity)
            exp.append(expected(rule, fired, c["value"]))
        tests.append(
            {
                "interval": "1s",
                "input_series": c["inputs"],
                "alert_rule_test": [
                    {"eval_time": c["at"], "alertname": c["alert"], "exp_alerts": exp},
                    *(
                        {"eval_time": at, "alertname": c["alert"], "exp_alerts": []}
                        for at in c["quiet_at"]
                    ),
                ],
            }
        )
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1s", "tests": tests}


def test_rules_mirror_every_warning_code_with_message_and_fix() -> None:
    rules = alert_rules()
    assert {r["labels"]["code"] for r in rules} == CODES
    assert {c["alert"] for c in CASES} == {r["alert"] for r in rules}  # each one tested
    for rule in rules:
        assert set(rule["annotations"]) == {"summary", "message", "fix"}
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
    assert yaml.safe_load(rules_yaml())["groups"][0]["rules"] == rules  # the YAML says that


def test_thresholds_come_from_the_defaults() -> None:
    text = rules_yaml()
    assert f"<= {DEFAULTS.full_fraction:g} * (node_filesystem_size_bytes" in text
    assert f">= {DEFAULTS.saturated_util_pct / 100:g}" in text
    assert f"for: {DEFAULTS.gpu_stalled_for_s:g}s" in text
    other = dataclasses.replace(DEFAULTS, full_fraction=0.2, fill_horizon_s=7200.0)
    changed = rules_yaml(other)
    assert "<= 0.2 * (node_filesystem_size_bytes" in changed
    assert "trainwatch_filesystem_seconds_to_full <= 7200" in changed
    assert "rate(node_disk_io_time_seconds_total[2m])" in rules_yaml(rate_window="2m")
    with pytest.raises(ValueError, match="rate window"):
        alert_rules(rate_window="1 minute")


def test_promtool_checks_and_unit_tests_the_rules(tmp_path: Path) -> None:
    promtool = need_tool("promtool")
    out = subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "rules"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
        check=True,
    )
    (tmp_path / "rules.yml").write_text(out.stdout)
    check = subprocess.run(
        [promtool, "check", "rules", "rules.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    rules = len(alert_rules()) + len(recording_rules("1m"))  # and the fleet's recording rules
    assert f"SUCCESS: {rules} rules found" in check.stdout
    (tmp_path / "tests.yml").write_text(json.dumps(unit_tests(alert_rules()), indent=1))
    unit = subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert unit.returncode == 0, unit.stdout[-6000:] + unit.stderr[-2000:]


def test_promtool_test_fails_when_an_alert_does_not_fire(tmp_path: Path) -> None:
    """The unit test can fail: expecting the disk-filling alert on a steady disk fails."""
    promtool = need_tool("promtool")
    (tmp_path / "rules.yml").write_text(rules_yaml())
    tests = unit_tests(alert_rules())
    filling = next(t for t in tests["tests"] if "Filling" in t["alert_rule_test"][0]["alertname"])
    filling["input_series"] = fill("a", "/t", ttf=1200, trend=1, points=10)
    (tmp_path / "tests.yml").write_text(json.dumps(tests))
    unit = subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert unit.returncode != 0 and "TrainwatchDiskFilling" in unit.stdout + unit.stderr
