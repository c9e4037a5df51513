"""prometheus.fleet on recorded answers of Prometheus's HTTP API: one entry per host however
many exporters it runs, the warnings node_exporter's and DCGM's numbers allow for a host
without our agent (never doubled for one with it), the busiest disk, the least free
filesystem, down and gone hosts, and one host's chart lines on a shared time axis."""

from __future__ import annotations

from typing import Any

import pytest

from trainwatch_lab.core.defaults import GIB
from trainwatch_lab.prometheus.fleet import (
    FIXES,
    chart_lines,
    chart_specs,
    counts,
    fold,
    grid,
    host_of,
    host_selector,
    instant_queries,
    seen_query,
)
from trainwatch_lab.prometheus.rules.fleet import recording_rules

NOW = 1_700_000_000.0


def vec(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, **labels}, "value": [NOW, repr(float(value))]}


def fs(instance: str, mountpoint: str, avail: float, size: float, **more: str):
    labels = {"instance": instance, "mountpoint": mountpoint, "device": more.get("device", "sda1")}
    labels["fstype"] = more.get("fstype", "ext4")
    return vec("node_filesystem_avail_bytes", avail, **labels), vec(
        "node_filesystem_size_bytes", size, **labels
    )


@pytest.mark.parametrize(
    ("instance", "host"),
    [
        ("node1:9100", "node1"),
        ("10.0.0.7:10917", "10.0.0.7"),
        ("[fe80::1]:9100", "[fe80::1]"),
        ("node1", "node1"),
        ("node1.example.org:9400", "node1.example.org"),
    ],
)
def test_a_host_is_its_instance_without_the_port(instance: str, host: str) -> None:
    assert host_of(instance) == host


def test_every_query_names_the_thresholds_of_the_defaults() -> None:
    queries = instant_queries("2m")
    assert "[2m]" in queries["disk_util"] and ">= 0.8" in queries["disk_saturated"]
    assert ">= 0.01" in queries["disk_saturated"]  # await 10 ms
    assert "[30s]) < 5" in queries["dcgm_stalled"]


def test_what_prometheus_records_already_is_read_not_computed_again() -> None:
    names = {record for record, _ in recording_rules("2m")}
    recorded = instant_queries("2m", recorded=names)
    assert all("label_replace" not in expr for expr in recorded.values())
    assert recorded["disk_util"] == (
        "topk by (host) (1, trainwatch:host_device:node_disk_io_time_seconds:rate2m)"
    )
    assert (
        "label_replace(rate(node_disk_io_time_seconds_total[2m])"
        in (instant_queries("2m")["disk_util"])
    )
    # recorded with another rate window: computed here
    assert "label_replace" in instant_queries("1m", recorded=names)["disk_util"]


def test_last_seen_is_asked_only_for_the_targets_absent_now() -> None:
    assert seen_query([]) is None
    query = seen_query([vec("", 1, instance="gpu03:9100"), vec("", 1, instance="[fe80::1]:9100")])
    assert query is not None
    assert r"up{instance=~`\[fe80::1\]:9100|gpu03:9100`} == 1" in query


def test_one_entry_per_host_worst_first() -> None:
    a_avail, a_size = fs("gpu01:10917", "/data", 500 * GIB, 1000 * GIB)
    n_avail, n_size = fs("gpu01:9100", "/", 50 * GIB, 100 * GIB)
    full_avail, full_size = fs("gpu02:9100", "/scratch", 0.5 * GIB, 100 * GIB, device="nvme0n1")
    results = {
        "up": [
            vec("up", 1, instance="gpu01:10917", job="trainwatch", hostname="gpu01.cluster"),
            vec("up", 1, instance="gpu01:9100", job="node"),
            vec("up", 1, instance="gpu02:9100", job="node"),
            vec("up", 0, instance="gpu02:9400", job="dcgm"),
            vec("up", 0, instance="gpu03:9100", job="node"),
        ],
        "scraped": [
            vec("up", NOW - 3, instance="gpu01:10917"),
            vec("up", NOW - 1, instance="gpu01:9100"),
            vec("up", NOW - 2, instance="gpu02:9100"),
            vec("up", NOW - 2, instance="gpu02:9400"),
        ],
        "seen": [
            vec("", NOW - 600, instance="gpu03:9100"),
            vec("", NOW - 900, instance="gpu04:9100"),
        ],
        "agent": [vec("trainwatch_sample_timestamp_seconds", NOW, instance="gpu01:10917")],
        "warnings": [
            vec(
                "trainwatch_warning",
                1,
                instance="gpu01:10917",
                code="shared-mount",
                severity="warning",
                subject="/mnt/share/runs",
            ),
        ],
        # Prometheus's per-host answers (prometheus.rules.fleet): one series per host
        "gpu": [vec("", 60, host="gpu01")],
        "gpu_count": [vec("", 2, host="gpu01")],
        "dcgm": [vec("", 99, host="gpu01"), vec("", 10, host="gpu02")],
        "dcgm_count": [vec("", 1, host="gpu01"), vec("", 4, host="gpu02")],
        "dcgm_stalled": [vec("", 0, host="gpu02", gpu="3")],
        "disk_util": [
            vec("", 0.07, host="gpu01", device="sda"),  # 7.000000000000001 %
            vec("", 0.95, host="gpu02", device="nvme0n1"),
        ],
        "disk_bytes": [vec("", 2e8, host="gpu02", device="nvme0n1")],
        "disk_saturated": [vec("", 0.95, host="gpu02", device="nvme0n1")],
        # every filesystem's free and total bytes: the fold finds the least free and the full
        "fs_avail": [a_avail, n_avail, full_avail],
        "fs_size": [a_size, n_size, full_size],
    }
    hosts = fold(results)
    assert [h["host"] for h in hosts] == ["gpu02", "gpu01", "gpu03", "gpu04"]
    gpu02, gpu01, gpu03, gpu04 = hosts

    # node_exporter + a DCGM exporter that is down: partial; its warnings from their numbers
    assert gpu02["status"] == "partial" and gpu02["agent"] is False
    codes = [(w["code"], w["severity"], w["subject"]) for w in gpu02["warnings"]]
    assert codes == [
        ("disk-almost-full", "critical", "/scratch"),  # 0.5 % free: under 1 %
        ("disk-saturated", "warning", "nvme0n1"),
        ("gpu-stalled", "warning", "GPU 3"),
    ]
    assert gpu02["worst"] == "critical"
    # each warning as a row and the filter read it; the fixes once per listing, by code
    assert all(set(w) == {"code", "severity", "subject", "message"} for w in gpu02["warnings"])
    assert {code for code, _, _ in codes} == set(FIXES)
    full = gpu02["warnings"][0]
    assert full["message"] == (
        "Only 512 MiB of 100 GiB (0.5 %) is free on /scratch (ext4 nvme0n1)."
    )
    assert gpu02["disk"] == {"device": "nvme0n1", "util_pct": 95.0, "bytes_per_s": 2e8}
    assert gpu02["gpu"] == {"count": 4, "util_pct": 10.0}
    assert (gpu02["state"], gpu01["state"], gpu03["state"], gpu04["state"]) == (
        "critical",
        "warning",
        "down",
        "down",
    )
    assert counts(hosts) == {"critical": 1, "warning": 1, "down": 2, "ok": 0}
    # what the row shows of its least free filesystem, and nothing the panel does not read
    assert gpu02["space"] == {"mountpoint": "/scratch", "avail_bytes": GIB // 2, "free_pct": 0.5}
    assert gpu02["last_seen"] == NOW - 2  # the scrape of the exporter that answers

    # our agent + node_exporter: one host, the agent's warnings only, our GPU numbers
    assert gpu01["name"] == "gpu01.cluster" and gpu01["status"] == "up" and gpu01["agent"]
    assert [i["instance"] for i in gpu01["instances"]] == ["gpu01:10917", "gpu01:9100"]
    assert [w["code"] for w in gpu01["warnings"]] == ["shared-mount"]
    assert gpu01["gpu"] == {"count": 2, "util_pct": 60.0}  # ours (DCGM says 99)
    assert gpu01["disk"] == {"device": "sda", "util_pct": 7.0, "bytes_per_s": None}
    assert gpu01["space"]["mountpoint"] == "/" and gpu01["last_seen"] == NOW - 1

    # down (a target that does not answer) and gone (no target any more): last seen
    assert (gpu03["status"], gpu03["last_seen"]) == ("down", NOW - 600)
    assert (gpu04["status"], gpu04["last_seen"], gpu04["instances"]) == ("gone", NOW - 900, [])


def test_nothing_known_is_nothing_listed() -> None:
    assert fold({}) == []
    assert fold({"up": [{"metric": {}, "value": [NOW, "1"]}]}) == []  # no instance label


@pytest.mark.parametrize("bad", ["", "a b", "n1`) or up", 'n1"}', "x" * 300])
def test_a_host_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a host"):
        host_selector(bad)


def test_the_selector_matches_the_host_on_any_port_and_only_it() -> None:
    assert host_selector("10.0.0.7") == r"instance=~`10\.0\.0\.7(:[0-9]+)?`"
    specs = chart_specs("gpu01", 60)
    assert [s["id"] for s in specs] == ["gpu", "disk_util", "disk_rate", "space"]
    assert all("instance=~`gpu01(:[0-9]+)?`" in q for s in specs for q in s["queries"])
    assert "[60s]" in specs[1]["queries"][0]


def test_chart_lines_share_one_time_axis() -> None:
    start, end, step = grid(3600, NOW)
    assert (end - start, step, end) == (3600, 15, NOW)
    count = round((end - start) / step) + 1
    spec = chart_specs("gpu01", 60)[0]
    ours = [
        {"metric": {"gpu": "1"}, "values": [[start + 15, "50"], [end, "NaN"]]},
        {"metric": {"gpu": "0"}, "values": [[start, "10"], [end, "90"]]},
    ]
    chart = chart_lines(spec, [ours, [{"metric": {"gpu": "0"}, "values": []}]], start, step, count)
    assert chart["title"] == "GPU utilization" and chart["unit"] == "%"
    assert [s["label"] for s in chart["series"]] == ["GPU 0", "GPU 1"]
    zero, one = (s["values"] for s in chart["series"])
    assert len(zero) == count and zero[0] == 10.0 and zero[-1] == 90.0 and zero[1] is None
    assert one[1] == 50.0 and one[-1] is None  # NaN is no value
    # our agent's answer is empty: DCGM's lines
    dcgm = [{"metric": {"gpu": "2"}, "values": [[end, "7"]]}]
    chart = chart_lines(spec, [[], dcgm], start, step, count)
    assert [s["label"] for s in chart["series"]] == ["GPU 2"]
