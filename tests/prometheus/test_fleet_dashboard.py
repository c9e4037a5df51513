"""``trainwatch-lab dashboard``: the Grafana dashboard's every panel, its PromQL sent to Debian's
Prometheus scraping two agents (one on a tmpfs that fills) and a DCGM exporter with a GPU that
holds memory at 0 %, our rules loaded: every query parses and answers with data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.prometheus.conftest import ROOT, env, http_get, wait_for

MIB = 1024 * 1024


def dashboard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "dashboard", *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
    )


def test_a_bad_rate_window_is_one_line() -> None:
    out = dashboard("--rate-window", "1 minute")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        "trainwatch-lab: error: a rate window is a duration like 30s, 1m or 5m; got '1 minute'\n"
    )


def answers(url: str, expr: str) -> tuple[int, list]:
    """(HTTP status, result) of ``expr`` over the last 30 s, as Grafana asks."""
    now = time.time()
    query = urllib.parse.urlencode(
        {"query": expr, "start": f"{now - 30:.3f}", "end": f"{now:.3f}", "step": "1"}
    )
    status, body = http_get(f"{url}/api/v1/query_range?{query}")
    data = json.loads(body)
    return status, data.get("data", {}).get("result", []) if status == 200 else [data]


@pytest.mark.root
def test_every_panel_parses_and_answers_with_data(
    start_prometheus, serve, fake_dcgm, tmpfs_mount, tmp_path: Path
) -> None:
    out = dashboard("--rate-window", "5s")  # as the test Prometheus's rules
    assert out.returncode == 0, out.stderr
    board = json.loads(out.stdout)
    assert board["uid"] == "trainwatch-fleet"
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "host"]
    targets = [
        (panel["title"], target["expr"].replace("$host", ".*"))
        for panel in board["panels"]
        for target in panel["targets"]
    ]
    assert len(targets) >= 12
    grid = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]]
    assert len(set(grid)) == len(grid)  # no two panels on one spot

    prometheus = start_prometheus()
    fs = tmpfs_mount("256m")
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    common = ("--file-sd", str(prometheus.sd_dir), "--interval", "0.5", "--gpu", "none")
    serve(str(fs.path), *common, host="127.0.0.1", as_host="node-a")
    serve(str(quiet), *common, host="127.0.0.2", as_host="node-b")
    prometheus.add_target(fake_dcgm("127.0.0.3", util=0, fb_mib=20000))
    stop = threading.Event()

    def fill() -> None:  # 4 MiB/s: disk-filling, a fill rate and a time to full
        block = os.urandom(2 * MIB)
        with open(fs.path / "run.log", "wb") as fh:
            while not stop.wait(0.5) and os.statvfs(fs.path).f_bavail * 4096 > 24 * MIB:
                fh.write(block)
                fh.flush()

    writer = threading.Thread(target=fill, daemon=True)
    writer.start()

    def empty() -> list[str]:
        return [title for title, expr in targets if not answers(prometheus.url, expr)[1]]

    try:
        for title, expr in targets:
            status, result = answers(prometheus.url, expr)
            assert status == 200, (title, expr, result)  # it parses
        assert wait_for(lambda: not empty(), timeout=90), empty()  # and answers with data
    finally:
        stop.set()
        writer.join(10)
