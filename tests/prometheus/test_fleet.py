"""The real thing: Debian's Prometheus scraping two ``trainwatch-lab serve`` agents as two hosts
(found through their file_sd targets), our rules loaded; a tmpfs filling on one of them raises
the disk-filling alert in Prometheus, node_exporter's names are queryable by their labels."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.prometheus.conftest import wait_for

MIB = 1024 * 1024


def firing(prometheus, alertname: str) -> list[dict]:
    return [
        a
        for a in prometheus.alerts()
        if a["labels"]["alertname"] == alertname and a["state"] == "firing"
    ]


@pytest.mark.root
def test_two_agents_a_filling_tmpfs_and_the_alert_in_prometheus(
    prometheus, serve, tmpfs_mount, tmp_path: Path
) -> None:
    fs = tmpfs_mount("256m")
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    common = ("--file-sd", str(prometheus.sd_dir), "--interval", "0.5", "--gpu", "none")
    a = serve(str(fs.path), *common, host="127.0.0.1", as_host="node-a")
    b = serve(str(quiet), *common, host="127.0.0.2", as_host="node-b")
    hosts = {f"{a.host}:{a.port}": "node-a", f"{b.host}:{b.port}": "node-b"}
    assert sorted(os.listdir(prometheus.sd_dir)) == sorted(
        [f"trainwatch-node-a-{a.port}.json", f"trainwatch-node-b-{b.port}.json"]
    )

    def both_up() -> bool:
        up = prometheus.query("up == 1")
        return {r["metric"]["instance"]: r["metric"].get("hostname") for r in up} == hosts

    assert wait_for(both_up, timeout=60), prometheus.query("up")
    # node_exporter's names, with node_exporter's labels, from both hosts
    disks = wait_for(
        lambda: prometheus.query("count by (instance) (node_disk_io_time_seconds_total)"), 30
    )
    assert {r["metric"]["instance"] for r in disks} == set(hosts)
    avail = prometheus.query(f'node_filesystem_avail_bytes{{mountpoint="{fs.path}"}}')
    assert len(avail) == 1
    assert avail[0]["metric"]["instance"] == f"{a.host}:{a.port}"
    assert avail[0]["metric"]["fstype"] == "tmpfs"
    assert avail[0]["metric"]["device"] == "trainwatch-test"  # the mount source, as there
    assert firing(prometheus, "TrainwatchDiskFilling") == []

    stop = threading.Event()

    def fill() -> None:  # 8 MiB/s: 256 MiB last 32 s, the alert comes in about 15
        block = os.urandom(4 * MIB)
        with open(fs.path / "checkpoint.pt", "wb") as fh:
            while not stop.wait(0.5) and os.statvfs(fs.path).f_bavail * 4096 > 24 * MIB:
                fh.write(block)
                fh.flush()

    writer = threading.Thread(target=fill, daemon=True)
    writer.start()
    try:
        alerts = wait_for(lambda: firing(prometheus, "TrainwatchDiskFilling"), timeout=60)
    finally:
        stop.set()
        writer.join(10)
    assert alerts, prometheus.alerts()
    (alert,) = alerts
    assert alert["labels"]["instance"] == f"{a.host}:{a.port}"
    assert alert["labels"]["hostname"] == "node-a"
    assert alert["labels"]["code"] == "disk-filling"
    assert alert["labels"]["subject"] == alert["labels"]["mountpoint"] == str(fs.path)
    assert alert["labels"]["severity"] == "critical"  # full in under 10 min
    assert "fix" in alert["annotations"] and str(fs.path) in alert["annotations"]["message"]
    # the agent's own warning says the same
    agent_warning = prometheus.query('trainwatch_warning{code="disk-filling"}')
    assert {r["metric"]["instance"] for r in agent_warning} <= {f"{a.host}:{a.port}"}
