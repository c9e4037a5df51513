"""``trainwatch-lab serve`` as a real process: /metrics, bad input, a port in use, signals,
the file_sd target."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus.conftest import ROOT, env, free_port, http_get, wait_for
from trainwatch_lab.core.storage.probe import host_tag


def tw(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("serve", "--listen", "127.0.0.1:http"), "--listen takes HOST:PORT"),
        (("serve", "--listen", ":70000"), "out of range"),
        (("serve", "--listen", "a:b:1"), "--listen takes HOST:PORT"),
        (("serve", "--listen", ""), "empty"),
        (("serve", "--listen", "no-such-host.invalid:9"), "cannot listen on"),
        (("serve", "--interval", "0"), "--interval"),
        (("serve", "--interval", "0.001"), "at least"),
        (("serve", "--gpu", "first"), "--gpu"),
        (("serve", "--pid", "0"), "--pid"),
        (("serve", "--pid", "999999999"), "no process"),
        (("serve", "--frobnicate"), "--frobnicate"),
        (("serve", ""), "empty path"),
        (("serve", "/etc/passwd/x"), "cannot exist"),
        (("serve", "--file-sd", "/nonexistent/dir", "--listen", "127.0.0.1:0"), "--file-sd"),
        (("rules", "--rate-window", "1 minute"), "rate window"),
        (("rules", "extra"), "unrecognized"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    proc = tw(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainwatch-lab: error:"), proc.stderr
    assert needle in lines[0]


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = tw("serve", "--listen", f"127.0.0.1:{port}", "--no-probe", timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"trainwatch-lab: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


def test_metrics_page_landing_page_and_not_found(serve, tmp_path: Path) -> None:
    agent = serve(str(tmp_path), "--gpu", "none")
    with urllib.request.urlopen(agent.url, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"node_filesystem_avail_bytes", "trainwatch_path_info"} <= names
    assert not any(n.startswith("trainwatch_gpu_") for n in names)  # --gpu none
    assert not any(n.startswith("trainwatch_process_") for n in names)  # no --pid
    # what Prometheus asks for: OpenMetrics preferred, gzip; the text format (as node_exporter
    # sends by default) is what it gets, gzipped
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    request = urllib.request.Request(
        agent.url, headers={"Accept": accept, "Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert resp.headers["Content-Encoding"] == "gzip"
        assert "trainwatch_path_info" in gzip.decompress(resp.read()).decode()
    status, body = http_get(f"http://127.0.0.1:{agent.port}/")
    assert status == 200 and 'href="metrics"' in body
    assert http_get(f"http://127.0.0.1:{agent.port}/favicon.ico")[0] == 404


def test_a_scrape_answers_from_memory_between_ticks(serve, tmp_path: Path) -> None:
    """At a 5 s interval, twenty scrapes in a row see at most two samples (a tick may land
    among them): a scrape formats the latest sample, it never takes one."""
    agent = serve(str(tmp_path), "--interval", "5", "--no-probe", "--gpu", "none")

    def stamp() -> str:
        text = agent.scrape()
        return next(x for x in text.splitlines() if x.startswith("trainwatch_sample_timestamp"))

    assert len({stamp() for _ in range(20)}) <= 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_within_a_second_and_removes_the_file_sd_target(
    tmp_path: Path, signum: int
) -> None:
    sd = tmp_path / "sd"
    sd.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "trainwatch_lab", "serve", str(tmp_path)),
            *("--file-sd", str(sd), "--listen", f"127.0.0.1:{port}", "--interval", "0.5"),
        ],
        env=env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        target = sd / f"trainwatch-{host_tag()}-{port}.json"
        assert wait_for(target.exists, timeout=30), proc.stderr
        assert os.listdir(sd) == [target.name]  # written whole: no temporary file left
        assert json.loads(target.read_text()) == [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"hostname": socket.gethostname()}}
        ]
        assert wait_for(lambda: http_get(f"http://127.0.0.1:{port}/metrics")[0] == 200, 30)
        time.sleep(1.2)  # a few ticks: the sampler, its helpers and a probe are busy
        sent = time.monotonic()
        proc.send_signal(signum)
        proc.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
        err = proc.communicate()[1]
    assert proc.returncode == 0, err
    assert took < 1.0, f"stopped {took:.2f} s after the signal"
    assert os.listdir(sd) == []
    assert [n for n in os.listdir(tmp_path) if n.startswith(".trainwatch-probe-")] == []
    assert err.splitlines()[0].startswith(f"trainwatch-lab: serving http://127.0.0.1:{port}/")
