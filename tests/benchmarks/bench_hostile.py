"""Hostile input against a real ``jupyter server`` (issue 24): RSS before and after, per endpoint.

    python -m tests.benchmarks.bench_hostile

Starts a server with the extension on a free port (as tests/support/lab.py does), measures
its RSS, sends each endpoint its hostile inputs (the finding's 50 MiB path, 1 MiB paths,
control characters, 1000 paths added and removed, junk parameters, an oversized stream
message), and prints one line per step with the RSS after it and the replies' codes.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from tempfile import TemporaryDirectory

from tests.support.lab import jupyter_lab


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def call(lab, path: str, method: str = "GET", body: bytes | None = None) -> int:
    req = urllib.request.Request(
        f"{lab.base}trainwatch-lab/api/{path}",
        data=body,
        method=method,
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code
    except OSError:
        return 599


async def big_message(lab) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    url = lab.base.replace("http", "ws") + "trainwatch-lab/api/stream"
    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {lab.token}"}))
    await ws.write_message(json.dumps({"interval": 1, "pad": "x" * (1 << 20)}))
    while await asyncio.wait_for(ws.read_message(), 10) is not None:
        pass
    return f"closed {ws.close_code}"


def main() -> None:
    with TemporaryDirectory() as tmp, jupyter_lab(Path(tmp)) as lab:
        pid = lab.proc.pid
        call(lab, "snapshot")
        time.sleep(3)
        print(f"start: RSS {rss_mb(pid):.0f} MB")
        steps = {
            "POST paths, 50 MiB path": lambda: [
                call(lab, "paths", "POST", json.dumps({"path": "/" + "a" * (50 << 20)}).encode())
            ],
            "POST paths, 1 MiB path x20": lambda: [
                call(lab, "paths", "POST", json.dumps({"path": "/" + "a" * (1 << 20)}).encode())
                for _ in range(20)
            ],
            "POST paths, control characters": lambda: [
                call(lab, "paths", "POST", json.dumps({"path": f"/tmp/x{c}y"}).encode())
                for c in "\x00\n\r\x1b\x7f\x85"
            ],
            "GET check/history/snapshot/processes junk x50": lambda: [
                call(lab, p)
                for _ in range(10)
                for p in (
                    "check?path=" + "a" * 8000,
                    "check?path=/tmp&probe=true",
                    "history?since=" + "9" * 5000,
                    "snapshot?" + "x" * 3000 + "=1",
                    "processes?pid=1",
                )
            ],
            "POST check, 1 MiB body": lambda: [
                call(lab, "check", "POST", b'{"path": "/tmp", "x": "' + b"y" * (1 << 20) + b'"}')
            ],
            "1000 paths added and removed": lambda: [
                (
                    call(lab, "paths", "POST", json.dumps({"path": f"{tmp}/run{i}"}).encode()),
                    call(lab, f"paths?path={tmp}/run{i}", "DELETE"),
                )[0]
                for i in range(1000)
            ],
            "stream, 1 MiB message": lambda: [asyncio.run(big_message(lab))],
        }
        for name, step in steps.items():
            t0 = time.monotonic()
            codes = step()
            time.sleep(2)
            summary = sorted({str(c) for c in codes})
            print(
                f"{name}: RSS {rss_mb(pid):.0f} MB, replies {', '.join(summary)}, "
                f"{time.monotonic() - t0:.1f} s"
            )
        time.sleep(10)
        print(f"end (10 s later): RSS {rss_mb(pid):.0f} MB")


if __name__ == "__main__":
    main()
