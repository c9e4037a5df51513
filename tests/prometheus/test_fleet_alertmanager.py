"""Alerts that leave the cluster: Debian's Prometheus with our rules scrapes a ``trainwatch-lab
serve`` agent watching an almost full tmpfs, sends the alerts to Debian's Alertmanager, which
routes them with README's ``alertmanager.yml`` to webhook receivers on 127.0.0.1 (warnings to
the team, critical ones to the on-call); the test reads what arrives (receiver, labels,
annotations)."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.prometheus.conftest import ROOT, _answers, free_port, stop, wait_for
from tests.support.env import need_tool
from tests.support.mounts import wait_until

MIB = 1024 * 1024


def readme_route() -> str:
    """The ``alertmanager.yml`` README shows (the block after its name)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"`alertmanager\.yml`.*?```yaml\n(.*?)```", text, re.S)
    assert match, "README shows no alertmanager.yml"
    return match.group(1)


class Webhook:
    """Alertmanager's webhook receiver: every POST body, by path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hook.received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def alertmanager(tmp_path: Path, webhook: Webhook) -> Iterator[str]:
    """Debian's Alertmanager with README's route, receivers pointed at ``webhook`` and the
    waits shortened to a second; its ``host:port``."""
    binary = need_tool("prometheus-alertmanager")
    config = readme_route().replace("http://alerts.example.org", webhook.url)
    config = re.sub(r"group_wait: \w+", "group_wait: 1s", config)
    home = tmp_path / "alertmanager"
    home.mkdir()
    (home / "alertmanager.yml").write_text(config)
    check = subprocess.run(
        [need_tool("amtool"), "check-config", str(home / "alertmanager.yml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = (home / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={home / 'alertmanager.yml'}",
            f"--storage.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        ready = wait_until(lambda: _answers(f"http://127.0.0.1:{port}/-/ready"), timeout=30)
        assert ready, (home / "alertmanager.log").read_text()[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


ALERTING = """\
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["{target}"]
"""


@pytest.mark.root
def test_an_almost_full_disk_reaches_the_teams_webhook_through_alertmanager(
    start_prometheus, serve, tmpfs_mount, alertmanager, webhook
) -> None:
    prometheus = start_prometheus(ALERTING.format(target=alertmanager))
    fs = tmpfs_mount("64m")
    with open(fs.path / "checkpoint.pt", "wb") as fh:  # 60 of 64 MiB: 6 % free
        fh.write(os.urandom(60 * MIB))
    common = ("--file-sd", str(prometheus.sd_dir), "--interval", "0.5", "--gpu", "none")
    agent = serve(str(fs.path), *common, as_host="node-a")

    def arrived() -> list[dict[str, Any]]:
        return [
            a
            for path, body in webhook.received
            for a in body["alerts"]
            if a["labels"].get("alertname") == "TrainwatchDiskAlmostFull"
        ]

    alerts = wait_for(arrived, timeout=90)
    assert alerts, (webhook.received, prometheus.alerts())
    path, body = next((p, b) for p, b in webhook.received if any(a in b["alerts"] for a in alerts))
    assert path == "/ml-team" and body["receiver"] == "ml-team"
    assert body["status"] == "firing" and body["version"] == "4"
    (alert,) = alerts
    labels, notes = alert["labels"], alert["annotations"]
    assert labels["code"] == "disk-almost-full" and labels["severity"] == "warning"
    assert labels["subject"] == labels["mountpoint"] == str(fs.path)
    assert labels["instance"] == f"{agent.host}:{agent.port}" and labels["hostname"] == "node-a"
    assert str(fs.path) in notes["message"] and "free" in notes["message"]
    assert notes["fix"].startswith("Free space") and notes["summary"]
    assert body["groupLabels"] == {
        "alertname": "TrainwatchDiskAlmostFull",
        "instance": labels["instance"],
        "subject": str(fs.path),
    }
    # the newest checkpoint (60 MiB) no longer fits in what is left: critical, the on-call
    oncall = wait_for(
        lambda: [a for p, b in webhook.received if p == "/ml-oncall" for a in b["alerts"]], 30
    )
    assert [a["labels"]["alertname"] for a in oncall] == ["TrainwatchCheckpointWontFit"]
    assert oncall[0]["labels"]["severity"] == "critical"
    assert all(p in ("/ml-team", "/ml-oncall") for p, _ in webhook.received)
