"""Row ``server-attacks`` (issue 34): the Jupyter server with the extension under the two
attacks its review found, with `/api/status` asked every 0.25 s meanwhile.

- ``ws-silent``: 100 WebSocket streams that complete the handshake and never read (their
  socket buffers small, as a stalled client's fill), held ``hold`` seconds, then closed;
- ``history-flood``: 40 clients asking ``history?since=0`` over and over.

Per attack: requests sent, the server's CPU and RSS before, at the end and after, the longest
`/api/status`. ``--code DIR`` runs another checkout's package (the before of a change):

    python -m tests.benchmarks.bench_server_attacks [--quick] [--code DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psutil

from tests.benchmarks.common import Config, Row, free_port

REPO = Path(__file__).resolve().parents[2]
SILENT_CLIENTS = 100
HISTORY_CLIENTS = 40
STATUS_EVERY_S = 0.25


class Server:
    def __init__(self, code: Path, interval: float) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tw-server-attacks-"))
        config = self.dir / "config" / "jupyter_server_config.d"
        config.mkdir(parents=True)
        shutil.copy(code / "trainwatch_lab" / "server" / "etc" / "trainwatch_lab.json", config)
        self.port, self.token = free_port(), uuid.uuid4().hex
        env = {
            **os.environ,
            "PYTHONPATH": str(code),
            "JUPYTER_CONFIG_PATH": str(config.parent),
            "JUPYTER_RUNTIME_DIR": str(self.dir / "runtime"),
        }
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root"),
                *(f"--port={self.port}", "--ip=127.0.0.1", f"--ServerApp.root_dir={self.dir}"),
                f"--IdentityProvider.token={self.token}",
                *(f"--TrainWatch.interval={interval}", "--TrainWatch.record=False"),
                "--TrainWatch.watch_processes=False",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.ps = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.get("api/status", 2)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.5)

    def get(self, path: str, timeout: float = 60) -> bytes:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/{path}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()

    def usage(self) -> dict[str, float]:
        t = self.ps.cpu_times()
        return {"cpu_s": t.user + t.system, "rss_mib": self.ps.memory_info().rss / 2**20}

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _status_watch(server: Server, stop: threading.Event, worst: list[float]) -> None:
    while not stop.is_set():
        started = time.monotonic()
        with contextlib.suppress(OSError):
            server.get("api/status", 120)
        worst[0] = max(worst[0], time.monotonic() - started)
        stop.wait(STATUS_EVERY_S)


def _silent_stream(server: Server) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        (
            "GET /trainwatch-lab/api/stream HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: token {server.token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)  # the handshake only, byte by byte: nothing of the stream
    return sock


def _attack(server: Server, name: str, seconds: float) -> dict[str, float]:
    stop, worst, sent = threading.Event(), [0.0], [0]
    watcher = threading.Thread(target=_status_watch, args=(server, stop, worst))
    before = server.usage()
    watcher.start()
    held: list[socket.socket] = []
    threads: list[threading.Thread] = []
    if name == "ws-silent":
        for _ in range(SILENT_CLIENTS):
            held.append(_silent_stream(server))
            sent[0] += 1
        time.sleep(seconds)
    else:
        lock = threading.Lock()

        def ask() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    server.get("trainwatch-lab/api/history?since=0", 120)
                with lock:
                    sent[0] += 1

        threads = [threading.Thread(target=ask) for _ in range(HISTORY_CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(seconds)
    end = server.usage()
    for s in held:
        s.close()
    stop.set()
    for t in [watcher, *threads]:
        t.join()
    time.sleep(5)  # what the server gives back once the clients left
    after = server.usage()
    return {
        "sent": sent[0],
        "cpu_s": end["cpu_s"] - before["cpu_s"],
        "rss_before_mib": before["rss_mib"],
        "rss_end_mib": end["rss_mib"],
        "rss_after_mib": after["rss_mib"],
        "status_worst_ms": worst[0] * 1000,
    }


def measure(code: Path, seconds: float, warm_s: float) -> dict[str, dict[str, float]]:
    server = Server(code, interval=0.05)
    try:
        end = time.monotonic() + warm_s
        while time.monotonic() < end:  # a client holds the sampler on: the history grows
            server.get("trainwatch-lab/api/snapshot")
            time.sleep(0.5)
        size = len(server.get("trainwatch-lab/api/history?since=0"))
        results = {name: _attack(server, name, seconds) for name in ("ws-silent", "history-flood")}
        results["history-flood"]["reply_kib"] = size / 1024
        return results
    finally:
        server.close()


def run(cfg: Config) -> list[Row]:
    seconds, warm = (20.0, 30.0) if cfg.quick else (120.0, 120.0)
    rows = []
    for name, r in measure(REPO, seconds, warm).items():
        rows.append(
            Row(
                "server-attacks",
                name,
                f"/api/status worst {r['status_worst_ms']:.0f} ms",
                note=(
                    f"{r['sent']:.0f} sent; CPU {r['cpu_s']:.1f} s; RSS {r['rss_before_mib']:.0f}"
                    f" → {r['rss_end_mib']:.0f} → {r['rss_after_mib']:.0f} MiB after"
                ),
                data=r,
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument("--seconds", type=float, help="each attack's length")
    parser.add_argument("--warm", type=float, help="history gathered before (seconds)")
    args = parser.parse_args()
    seconds = args.seconds or (20.0 if args.quick else 120.0)
    warm = args.warm or (30.0 if args.quick else 120.0)
    print(json.dumps(measure(args.code.resolve(), seconds, warm), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
