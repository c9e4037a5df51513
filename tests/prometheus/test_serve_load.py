"""Issue 24, finding 6: the agent under load and behind TLS and basic auth, for real.

``trainwatch-lab serve`` under ``ulimit -n 128`` with 300 connections held open costs next to
no CPU (no busy loop on EMFILE) and answers again once they go; an idle connection and a
client that sends half a request are dropped (issue 34: tests/prometheus/test_agent_http.py
for the limit on requests in flight); the web config
file of exporter-toolkit (the one node_exporter reads) turns on TLS and basic auth, checked
with a real TLS client, the right password and a wrong one."""

from __future__ import annotations

import base64
import contextlib
import os
import resource
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.prometheus.conftest import ROOT, env, free_port, stop, wait_for
from tests.support.env import need_tool
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.prometheus.agent import Agent
from trainwatch_lab.prometheus.agent_http import Limits

CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


@contextlib.contextmanager
def agent_process(*args: str, nofile: int | None = None) -> Iterator[tuple[subprocess.Popen, int]]:
    port = free_port()

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainwatch_lab",
            "serve",
            "--no-probe",
            "--gpu",
            "none",
            "--listen",
            f"127.0.0.1:{port}",
            *args,
            str(ROOT),
        ],
        env=env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )
    try:
        assert wait_for(lambda: _connects(port), 30, 0.1), proc.stderr
        yield proc, port
    finally:
        stop(proc)


def _connects(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def scrape(port: int, timeout: float = 10) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_300_idle_connections_under_ulimit_128_cost_no_cpu_and_none_starves_it() -> None:
    with agent_process(nofile=128) as (proc, port):
        held = []
        try:
            for _ in range(300):
                held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            time.sleep(1.0)  # the agent takes what it can take
            before, t0 = cpu_s(proc.pid), time.monotonic()
            time.sleep(5.0)
            share = (cpu_s(proc.pid) - before) / (time.monotonic() - t0)
            fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        finally:
            for s in held:
                s.close()
        # a busy loop on accept()'s EMFILE costs a whole core; sampling costs a few percent
        assert share < 0.3, f"{share:.0%} of a core with idle connections ({fds} fds)"
        assert wait_for(lambda: scrape(port) == 200, 30, 0.5)


@pytest.fixture
def agent() -> Iterator[Agent]:
    sampler = Sampler([], interval=0.2)
    running = Agent(
        sampler, "127.0.0.1", 0, limits=Limits(max_requests=2, idle_timeout_s=1.0)
    ).start()
    yield running
    running.stop()


@pytest.mark.parametrize("sent", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
def test_an_idle_or_slow_client_is_dropped(agent: Agent, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as s:
        s.sendall(sent)
        t0 = time.monotonic()
        assert s.recv(1024) == b""  # closed by the agent
        assert time.monotonic() - t0 < 20  # its 1 s timeout, many times over


# -- TLS and basic auth -----------------------------------------------------------------------
@pytest.fixture
def web_config(tmp_path: Path) -> Path:
    bcrypt = pytest.importorskip("bcrypt")
    openssl = need_tool("openssl")
    cert, key = tmp_path / "node.crt", tmp_path / "node.key"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    hashed = bcrypt.hashpw(b"right-horse", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    return config


def tls_get(port: int, cafile: Path, password: str | None) -> int:
    context = ssl.create_default_context(cafile=str(cafile))
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if password is not None:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            r.read()  # (empty until the first tick)
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_tls_and_basic_auth_from_the_exporter_toolkit_web_config(web_config: Path) -> None:
    cert = web_config.parent / "node.crt"
    with agent_process("--web.config.file", str(web_config)) as (proc, port):
        assert tls_get(port, cert, "right-horse") == 200
        assert tls_get(port, cert, "right-horse") == 200  # the remembered answer
        assert tls_get(port, cert, "wrong-horse") == 401
        assert tls_get(port, cert, None) == 401
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    # the serving line only: no line per request, per 401, per aborted handshake
    assert len(proc.stderr.read().splitlines()) == 1


@pytest.mark.parametrize(
    "text, needle",
    [
        ("tls_server_config: {cert_file: /nonexistent.crt, key_file: /x.key}\n", "tls_server"),
        ("basic_auth_users: {prometheus: plain-password}\n", "no bcrypt hash"),
        ("basic_auth_user: {}\n", "unknown key"),
        (
            "tls_server_config: {cert_file: a.crt, key_file: a.key, min_versoin: TLS13}\n",
            "unknown key tls_server_config.min_versoin",
        ),
        ("tls_server_config: [\n", "not YAML"),
    ],
)
def test_a_bad_web_config_is_one_line_and_exit_2(tmp_path: Path, text: str, needle: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(text)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainwatch_lab",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--web.config.file",
            str(config),
        ],
        env=env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert needle in proc.stderr and "plain-password" not in proc.stderr
