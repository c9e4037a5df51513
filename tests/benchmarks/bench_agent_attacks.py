"""Row agent-attacks (issue 34): ``trainwatch-lab serve`` behind TLS and basic auth (bcrypt
cost 12) under three attacks, with node_exporter under the same ones beside it.

    python -m tests.benchmarks.run --only agent-attacks
    python -m tests.benchmarks.bench_agent_attacks [--quick] [--code DIR]   # DIR: another tree

One web config file serves both (exporter-toolkit's format). Per attack and target: a
"Prometheus" scrapes every second with the right password (10 s timeout), on a new HTTPS
connection each time (the harder case: a kept-alive one may hold a slot from before the
attack), while the attack runs; the row gives the
requests the attack sent, the scrapes answered and failed, the longest scrape, the target's
CPU (whole process tree) during the attack and its RSS before and after. Attacks: 60 idle
connections held open; TLS reconnect churn (16 clients completing handshakes and closing,
as fast as they can); a wrong-password flood (60 kept-alive connections, a new password
each request).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.benchmarks.common import (
    REPO,
    Config,
    Row,
    TreeCpu,
    free_port,
    guarded,
    judged,
    skipped,
)

GROUP = "agent-attacks"
PASSWORD = "right-horse"
ATTACKS = ("60 idle connections", "TLS reconnect churn", "wrong-password flood")


def _auth(password: str) -> dict[str, str]:
    return {
        "Authorization": "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()
    }


class Prometheus:
    """Scrapes every second, a new HTTPS connection each time; counts and times answers."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.port, self.context = port, context
        self.answered = self.failed = 0
        self.longest = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _conn(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=self.context)

    def _run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            conn = self._conn()  # a new connection each scrape: the harder case
            try:
                conn.request("GET", "/metrics", headers=_auth(PASSWORD))
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            finally:
                conn.close()
            took = time.monotonic() - t0
            self.longest = max(self.longest, took)
            if ok:
                self.answered += 1
            else:
                self.failed += 1
            self.stop.wait(max(0.0, 1.0 - took))


def _idle(port: int, context: ssl.SSLContext, stop: threading.Event, sent: list[int]) -> None:
    held = []
    for _ in range(60):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            sent[0] += 1
        except OSError:
            pass
    stop.wait()
    for s in held:
        s.close()


def _churn(port: int, context: ssl.SSLContext, stop: threading.Event, sent: list[int]) -> None:
    def one() -> None:
        while not stop.is_set():
            try:
                with (
                    socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                    context.wrap_socket(raw, server_hostname="127.0.0.1"),
                ):
                    pass
            except OSError:
                pass
            sent[0] += 1

    _threads(16, one, stop)


def _flood(port: int, context: ssl.SSLContext, stop: threading.Event, sent: list[int]) -> None:
    def one(n: int) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
        i = 0
        while not stop.is_set():
            try:
                conn.request("GET", "/metrics", headers=_auth(f"wrong-{n}-{i}"))
                conn.getresponse().read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
            sent[0] += 1
            i += 1
        conn.close()

    _threads(60, one, stop, numbered=True)


def _threads(
    n: int, fn: Callable[..., None], stop: threading.Event, numbered: bool = False
) -> None:
    threads = [
        threading.Thread(target=fn, args=(i,) if numbered else (), daemon=True) for i in range(n)
    ]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(40)


def _start(kind: str, web: Path, code: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    if kind == "agent":
        env = dict(os.environ, PYTHONPATH=str(code))
        cmd = [
            *(sys.executable, "-m", "trainwatch_lab", "serve", "--no-probe", "--gpu", "none"),
            *("--listen", f"127.0.0.1:{port}", "--web.config.file", str(web), "/var/tmp"),
        ]
        proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
    else:
        exporter = shutil.which("prometheus-node-exporter") or "prometheus-node-exporter"
        cmd = [
            *(exporter, "--collector.disable-defaults", "--collector.diskstats"),
            *("--collector.filesystem", f"--web.listen-address=127.0.0.1:{port}"),
            f"--web.config.file={web}",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def _ready(port: int, context: ssl.SSLContext, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
            conn.request("GET", "/metrics", headers=_auth(PASSWORD))
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"127.0.0.1:{port} never answered with the right password")


def _one(kind: str, attack: str, web: Path, ca: Path, code: Path, seconds: float) -> Row:
    context = ssl.create_default_context(cafile=str(ca))
    proc, port = _start(kind, web, code)
    try:
        _ready(port, context)
        ps = psutil.Process(proc.pid)
        time.sleep(2.0)  # warm-up: the password remembered, the first ticks behind
        rss0, meter, t0 = ps.memory_info().rss, TreeCpu(ps.pid), time.monotonic()
        prometheus = Prometheus(port, context)
        stop, sent = threading.Event(), [0]
        fn = {"60 idle connections": _idle, "TLS reconnect churn": _churn}.get(attack, _flood)
        attacker = threading.Thread(target=fn, args=(port, context, stop, sent), daemon=True)
        attacker.start()
        prometheus.thread.start()
        time.sleep(seconds)
        prometheus.stop.set()
        prometheus.thread.join(15)
        cpu = meter.poll() / (time.monotonic() - t0) * 1000
        rss1 = ps.memory_info().rss
        stop.set()
        attacker.join(60)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    name = "trainwatch-lab serve" if kind == "agent" else "node_exporter"
    return Row(
        GROUP,
        f"{name}, {attack}: scrapes answered / failed",
        f"{prometheus.answered} / {prometheus.failed}",
        "every scrape answered" if kind == "agent" else "",
        judged(prometheus.failed == 0) if kind == "agent" else "",
        f"{sent[0]} attack requests/connections in {seconds:.0f} s; longest scrape "
        f"{prometheus.longest * 1000:.0f} ms; CPU {cpu:.0f} ms/s; RSS "
        f"{rss0 / 2**20:.0f} -> {rss1 / 2**20:.0f} MiB",
        data={
            "sent": sent[0],
            "answered": prometheus.answered,
            "failed": prometheus.failed,
            "longest_ms": prometheus.longest * 1000,
            "cpu_ms_per_s": cpu,
            "rss_mib": [rss0 / 2**20, rss1 / 2**20],
        },
    )


def _measure(
    cfg: Config, code: Path = REPO, targets: tuple[str, ...] = ("agent", "node")
) -> list[Row]:
    import bcrypt

    from tests.support.certs import make_ca, make_cert

    if shutil.which("prometheus-node-exporter") is None:
        targets = tuple(t for t in targets if t != "node")
    seconds = 8.0 if cfg.quick else 20.0
    work = Path(tempfile.mkdtemp(prefix="twbench-attacks-"))
    try:
        ca = make_ca(work)
        server = make_cert(work, ca, "server", "IP:127.0.0.1")
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=12)).decode()
        web = work / "web.yml"
        web.write_text(
            f"tls_server_config:\n  cert_file: {server.cert}\n  key_file: {server.key}\n"
            f"basic_auth_users:\n  prometheus: '{hashed}'\n"
        )
        rows = []
        for attack in ATTACKS:
            for kind in targets:
                print(f"[bench] {GROUP}: {kind}, {attack}", file=sys.stderr, flush=True)
                rows.append(_one(kind, attack, web, ca.cert, code, seconds))
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(cfg: Config) -> list[Row]:
    return guarded(GROUP, "agent under attack", lambda: _measure(cfg)) or [
        skipped(GROUP, "agent under attack", "nothing measured")
    ]


def main() -> int:
    from tests.benchmarks.run import table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--code", type=Path, default=REPO, help="the tree whose agent runs")
    parser.add_argument("--agent-only", action="store_true", help="without node_exporter")
    args = parser.parse_args()
    targets = ("agent",) if args.agent_only else ("agent", "node")
    print(table(_measure(Config.make(args.quick), args.code.resolve(), targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
