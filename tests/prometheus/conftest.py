"""Real processes for the Prometheus tests: ``trainwatch-lab serve`` agents (as other hosts if
asked), Debian's Prometheus and node_exporter on free ports of 127.0.0.1, each stopped at the
end of its test. A missing binary skips on a laptop and fails under CI=true (tests/support/env).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import need_tool
from tests.support.mounts import wait_until

ROOT = Path(__file__).resolve().parents[2]
# `trainwatch-lab` with socket.gethostname() saying argv[1]: another "host" on this machine
AS_HOST = (
    "import socket, sys; host = sys.argv.pop(1); socket.gethostname = lambda: host; "
    "from trainwatch_lab.cli import main; sys.exit(main(sys.argv[1:]))"
)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), e.get("PYTHONPATH")) if p)
    return e


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


@dataclass
class Agent:
    proc: subprocess.Popen[str]
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def scrape(self) -> str:
        status, body = http_get(self.url)
        assert status == 200, body
        return body


@pytest.fixture
def serve() -> Iterator[Callable[..., Agent]]:
    """``serve(*args, host="127.0.0.1", as_host=None)``: a running agent on a free port of
    ``host``, answering /metrics; stopped (SIGTERM) at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, host: str = "127.0.0.1", as_host: str | None = None) -> Agent:
        port = free_port(host)
        cmd = [sys.executable, "-m", "trainwatch_lab"]
        if as_host is not None:
            cmd = [sys.executable, "-c", AS_HOST, as_host]
        cmd += ["serve", "--listen", f"{host}:{port}", *args]
        proc = subprocess.Popen(
            cmd, env=env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(proc)
        agent = Agent(proc, host, port)

        def answers() -> bool:
            assert proc.poll() is None, proc.communicate()[1]
            with contextlib.suppress(OSError):
                return "trainwatch_sample_timestamp_seconds" in agent.scrape()
            return False

        assert wait_until(answers, timeout=30), "the agent never answered with a sample"
        return agent

    yield start
    for proc in started:
        stop(proc)


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    port: int
    sd_dir: Path

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        status, body = http_get(f"http://127.0.0.1:{self.port}/api/v1/{path}?{query}")
        assert status == 200, body
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        return self.api("query", query=promql)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]


PROMETHEUS_YML = """\
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: trainwatch
    file_sd_configs:
      - files: ["{sd}/*.json"]
        refresh_interval: 1s
"""


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    """Debian's Prometheus on a free port of 127.0.0.1, its own storage, 1 s scrape and
    evaluation intervals, our rules (``trainwatch-lab rules --rate-window 5s``) loaded, and
    every agent that writes a file_sd target into ``.sd_dir`` scraped."""
    binary = need_tool("prometheus")
    sd = tmp_path / "sd"
    sd.mkdir()
    rules = tmp_path / "rules.yml"
    out = subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "rules", "--rate-window", "5s"],
        capture_output=True,
        text=True,
        env=env(),
        check=True,
    )
    rules.write_text(out.stdout)
    config = tmp_path / "prometheus.yml"
    config.write_text(PROMETHEUS_YML.format(rules=rules, sd=sd))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(proc, port, sd)
    try:
        ready = wait_until(lambda: _answers(f"http://127.0.0.1:{port}/-/ready"), timeout=30)
        assert ready, (tmp_path / "prometheus.log").read_text()[-2000:]
        yield server
    finally:
        stop(proc)
        log.close()


@pytest.fixture
def node_exporter() -> Iterator[str]:
    """Debian's node_exporter with only its diskstats and filesystem collectors; its URL."""
    binary = need_tool("prometheus-node-exporter")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--collector.disable-defaults",
            "--collector.diskstats",
            "--collector.filesystem",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert wait_until(lambda: _answers(url), timeout=20)
        yield url
    finally:
        stop(proc)


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError):
        return http_get(url, timeout=2)[0] == 200
    return False


def wait_for(predicate: Callable[[], Any], timeout: float, step: float = 0.5) -> Any:
    """Poll until ``predicate()`` is truthy; returns its value (None on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)
