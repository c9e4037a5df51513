"""The fleet's PromQL in Prometheus's own engine (``promtool test rules``, no server): the
recording rules ``trainwatch-lab rules`` ships fold a host's exporters into one series per
host, and the disk-almost-full rule flags exactly the filesystems the Advisor's thresholds
flag (10 % free, or 2 GiB on filesystems larger than that), as the listing's fold does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import need_tool
from trainwatch_lab.core.defaults import DEFAULTS, GIB
from trainwatch_lab.prometheus.fleet import fold
from trainwatch_lab.prometheus.rules.fleet import host_series
from trainwatch_lab.prometheus.rules.ruleset import rules_yaml

NODE = 'instance="gpu01:9100",job="node"'
AGENT = 'instance="gpu01:10917",job="trainwatch"'
DCGM = 'instance="gpu01:9400",job="dcgm"'


def promtool_test(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess:
    promtool = need_tool("promtool")
    (tmp_path / "rules.yml").write_text(rules_yaml(rate_window="1m"))
    spec = {"rule_files": ["rules.yml"], "evaluation_interval": "15s", "tests": tests}
    (tmp_path / "tests.yml").write_text(json.dumps(spec, indent=1))
    return subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )


def sample(labels: str, value: float) -> dict[str, Any]:
    return {"labels": labels, "value": value}


def recorded_tests(busy: float) -> list[dict[str, Any]]:
    """One host exported by node_exporter, our agent (the same disk, twice) and DCGM."""
    per_15s = busy * 15
    series = [
        {"series": f"up{{{NODE}}}", "values": "1x8"},
        {"series": f"up{{{AGENT}}}", "values": "1x8"},
        {"series": f"up{{{DCGM}}}", "values": "1 1 1 1 1 1 1 0 0"},
        {
            "series": f'node_disk_io_time_seconds_total{{{NODE},device="sda"}}',
            "values": f"0+{per_15s:g}x8",
        },
        {
            "series": f'node_disk_io_time_seconds_total{{{AGENT},device="sda"}}',
            "values": f"0+{per_15s / 2:g}x8",
        },
        {
            "series": f'node_filesystem_avail_bytes{{{NODE},device="md0",mountpoint="/data",'
            'fstype="ext4"}',
            "values": "25x8",
        },
        {
            "series": f'node_filesystem_size_bytes{{{NODE},device="md0",mountpoint="/data",'
            'fstype="ext4"}',
            "values": "100x8",
        },
        {"series": f'DCGM_FI_DEV_GPU_UTIL{{{DCGM},gpu="0"}}', "values": "20x8"},
        {"series": f'DCGM_FI_DEV_GPU_UTIL{{{DCGM},gpu="1"}}', "values": "60x8"},
        {
            "series": f'trainwatch_warning{{{AGENT},code="shared-mount",severity="warning",'
            'subject="/mnt/runs"}',
            "values": "1x8",
        },
    ]
    checks = [  # (recorded series, at, labels, value)
        ("trainwatch:host_device:node_disk_io_time_seconds:rate1m", "1m", 'device="sda"', busy),
        (
            "trainwatch:host_fs:node_filesystem_free:ratio",
            "1m",
            'device="md0",mountpoint="/data",fstype="ext4"',
            0.25,
        ),
        ("trainwatch:host:dcgm_fi_dev_gpu_util:avg", "1m", "", 40),
        ("trainwatch:host:up:min", "1m", "", 1),
        ("trainwatch:host:up:min", "2m", "", 0),  # the DCGM exporter is down
        ("trainwatch:host:warning_severity:max", "1m", "", 2),
    ]
    return [
        {
            "interval": "15s",
            "input_series": series,
            "promql_expr_test": [
                {
                    "expr": record,
                    "eval_time": at,
                    "exp_samples": [
                        sample(
                            f'{{__name__="{record}",host="gpu01"' + (f",{more}}}" if more else "}"),
                            value,
                        )
                    ],
                }
                for record, at, more, value in checks
            ],
        }
    ]


def test_the_recording_rules_fold_every_exporter_of_a_host_into_one_series(tmp_path) -> None:
    unit = promtool_test(tmp_path, recorded_tests(busy=0.5))
    assert unit.returncode == 0, unit.stdout[-4000:] + unit.stderr[-2000:]


def test_the_recording_rules_test_can_fail(tmp_path) -> None:
    """Expecting another disk busy share fails: the check above is a real one."""
    tests = recorded_tests(busy=0.5)
    tests[0]["promql_expr_test"][0]["exp_samples"][0]["value"] = 0.25
    unit = promtool_test(tmp_path, tests)
    assert unit.returncode != 0 and "node_disk_io_time_seconds:rate1m" in unit.stderr


FULL_CASES = [  # (avail, size, flagged)
    (50 * GIB, 100 * GIB, False),
    (9 * GIB, 100 * GIB, True),  # under 10 %
    (1.5 * GIB, 10 * GIB, True),  # 15 % free, but under 2 GiB on a 10 GiB disk
    (0.225 * GIB, 1.5 * GIB, False),  # 15 %: "under 2 GiB" counts on larger disks only
    (1.9 * GIB, 30 * GIB, True),  # 6 %... and under 2 GiB
    (3 * GIB, 1000 * GIB, True),  # 0.3 %
    (10 * 1024**2, 64 * 1024**2, False),  # a tiny tmpfs at 15 % is fine
]


@pytest.mark.parametrize("recorded", [False, True], ids=["inline", "recorded"])
def test_disk_almost_full_uses_the_advisors_thresholds(tmp_path, recorded) -> None:
    """The same answer computed inline and read from the recording rules."""
    assert DEFAULTS.full_fraction == 0.10 and DEFAULTS.full_bytes == 2 * GIB
    series, expect = [], []
    # a recorded series keeps its name through the comparisons
    record = "trainwatch:host_fs:node_filesystem_avail_bytes:almost_full"
    named = f'__name__="{record}",' if recorded else ""
    for k, (avail, size, flagged) in enumerate(FULL_CASES):
        labels = f'instance="n{k}:9100",device="sd{k}",mountpoint="/d{k}",fstype="ext4"'
        series += [
            {"series": f"node_filesystem_avail_bytes{{{labels}}}", "values": f"{avail:.0f}x2"},
            {"series": f"node_filesystem_size_bytes{{{labels}}}", "values": f"{size:.0f}x2"},
        ]
        if flagged:
            value = avail
            expect.append(
                sample(
                    f'{{{named}host="n{k}",device="sd{k}",mountpoint="/d{k}",fstype="ext4"}}',
                    float(f"{value:.0f}"),
                )
            )
    test = {
        "interval": "15s",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": record if recorded else host_series("1m")[record],
                "eval_time": "15s",
                "exp_samples": expect,
            }
        ],
    }
    unit = promtool_test(tmp_path, [test])
    assert unit.returncode == 0, unit.stdout[-4000:] + unit.stderr[-2000:]


def test_the_listing_flags_the_filesystems_the_rule_flags() -> None:
    """The fold judges every host's filesystems itself (Prometheus sends their free and total
    bytes): the same cases as the rule above, the same verdicts."""
    answers: dict[str, list[dict[str, Any]]] = {"up": [], "fs_avail": [], "fs_size": []}
    for k, (avail, size, _) in enumerate(FULL_CASES):
        labels = {"host": f"n{k}", "device": f"sd{k}", "mountpoint": f"/d{k}", "fstype": "ext4"}
        answers["up"].append({"metric": {"instance": f"n{k}:9100"}, "value": [0, "1"]})
        answers["fs_avail"].append({"metric": labels, "value": [0, f"{avail:.0f}"]})
        answers["fs_size"].append({"metric": labels, "value": [0, f"{size:.0f}"]})
    hosts = {h["host"]: h for h in fold(answers)}
    flagged = [[w["code"] for w in hosts[f"n{k}"]["warnings"]] for k in range(len(FULL_CASES))]
    assert flagged == [["disk-almost-full"] if full else [] for *_, full in FULL_CASES]
