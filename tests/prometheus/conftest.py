"""Real processes for the Prometheus tests: ``trainwatch-lab serve`` agents (as other hosts if
asked), Debian's Prometheus and node_exporter on free ports of 127.0.0.1, a static "DCGM
exporter" (DCGM's metric names and labels, as a host without our agent exports them), each
stopped at the end of its test. A missing binary skips on a laptop and fails under CI=true
(tests/support/env). The fixtures serve tests/server too (the fleet endpoint, the panel).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop(self.proc)

    def add_target(self, target: str, **labels: str) -> None:
        """Announce ``host:port`` through file_sd, as ``serve --file-sd`` does."""
        body = json.dumps([{"targets": [target], "labels": labels}])
        name = target.replace(":", "-").replace("[", "").replace("]", "")
        tmp = self.sd_dir / f".{name}.tmp"
        tmp.write_text(body)
        tmp.rename(self.sd_dir / f"static-{name}.json")

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
{extra}"""


@pytest.fixture
def prometheus(start_prometheus: Callable[..., Prometheus]) -> Prometheus:
    """Debian's Prometheus on a free port of 127.0.0.1, its own storage, 1 s scrape and
    evaluation intervals, our rules (``trainwatch-lab rules --rate-window 5s``) loaded, and
    every agent that writes a file_sd target into ``.sd_dir`` scraped."""
    return start_prometheus()


@pytest.fixture
def start_prometheus(tmp_path: Path) -> Iterator[Callable[..., Prometheus]]:
    """``start_prometheus(extra="")``: the ``prometheus`` fixture's server, with ``extra``
    (more ``scrape_configs`` entries, YAML indented by two) appended to its configuration."""
    started: list[tuple[subprocess.Popen[bytes], Any]] = []

    def start(extra: str = "") -> Prometheus:
        home = tmp_path / f"prometheus-{len(started)}"
        home.mkdir()
        proc, log, server = _start_prometheus(home, extra)
        started.append((proc, log))
        return server

    yield start
    for proc, log in started:
        stop(proc)
        log.close()


def _start_prometheus(
    tmp_path: Path, extra: str
) -> tuple[subprocess.Popen[bytes], Any, Prometheus]:
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
    config.write_text(PROMETHEUS_YML.format(rules=rules, sd=sd, extra=extra))
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
    ready = wait_until(lambda: _answers(f"http://127.0.0.1:{port}/-/ready"), timeout=30)
    if not ready:
        stop(proc)
        log.close()
        raise AssertionError((tmp_path / "prometheus.log").read_text()[-2000:])
    return proc, log, server


@pytest.fixture
def node_exporter(node_exporter_on: Callable[[str], str]) -> str:
    """Debian's node_exporter with only its diskstats and filesystem collectors; its URL."""
    return f"http://{node_exporter_on('127.0.0.1')}/metrics"


@pytest.fixture
def node_exporter_on() -> Iterator[Callable[[str], str]]:
    """``node_exporter_on(host)``: ``host:port`` of a node_exporter (diskstats and filesystem
    collectors) listening on ``host`` (127.0.0.3: another host of the fleet)."""
    binary = need_tool("prometheus-node-exporter")
    started: list[subprocess.Popen[bytes]] = []

    def start(host: str) -> str:
        port = free_port(host)
        proc = subprocess.Popen(
            [
                binary,
                "--collector.disable-defaults",
                "--collector.diskstats",
                "--collector.filesystem",
                f"--web.listen-address={host}:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(proc)
        assert wait_until(lambda: _answers(f"http://{host}:{port}/metrics"), timeout=20)
        return f"{host}:{port}"

    yield start
    for proc in started:
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


# DCGM exporter's names and labels (dcgm-exporter's default counters), for a host that runs
# it and node_exporter but not our agent: one GPU at 0 % holding memory
DCGM_LABELS = (
    'gpu="0",UUID="GPU-{uuid}",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}"'
)
DCGM_TEXT = (
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    f"DCGM_FI_DEV_GPU_UTIL{{{{{DCGM_LABELS}}}}} {{util}}\n"
    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
    "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    f"DCGM_FI_DEV_FB_USED{{{{{DCGM_LABELS}}}}} {{fb}}\n"
)


@pytest.fixture
def fake_dcgm() -> Iterator[Callable[..., str]]:
    """``fake_dcgm(host="127.0.0.3", util=0, fb_mib=20000)``: ``host:port`` of a static
    /metrics in DCGM exporter's names (no GPU needed), served until the test ends."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(host: str = "127.0.0.3", util: float = 0, fb_mib: float = 20000) -> str:
        body = DCGM_TEXT.format(uuid="8f6b2c1e", host=host, util=util, fb=fb_mib).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer((host, free_port(host)), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"{host}:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
