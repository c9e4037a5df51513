"""``watch``/``serve --notify``: a real webhook hears of a full tmpfs; bad targets exit 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.advice.test_notify import Webhook
from tests.support.mounts import wait_until
from tests.test_cli import env, tw

MIB = 1024 * 1024


@pytest.mark.parametrize("command", ["watch", "serve"])
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--notify", "ftp://example.com/x"), "--notify takes an http:// or https:// webhook URL"),
        (("--notify", "hooks.slack.com/x"), "--notify takes an http:// or https:// webhook URL"),
        (
            ("--notify", "https://example.com/x", "--notify-format", "teams"),
            "--notify-format must be one of json, slack, dingtalk, feishu, wecom",
        ),
        (("--notify", "https://example.com/x#secret="), "must be secret=<the robot's"),
        (
            ("--notify", "https://example.com/x#secret=SECx", "--notify-format", "slack"),
            "#secret= signs dingtalk and feishu robots only",
        ),
    ],
)
def test_a_bad_target_is_one_line_and_exit_2(
    tmp_path: Path, command: str, extra: tuple[str, ...], needle: str
) -> None:
    out = (
        tw(command, "--listen", "127.0.0.1:1", *extra, str(tmp_path))
        if command == "serve"
        else (tw(command, "--duration", "30", *extra, str(tmp_path)))
    )
    assert out.returncode == 2, out
    (line,) = out.stderr.splitlines()
    assert line.startswith("trainwatch-lab: error: ") and needle in line
    assert list(tmp_path.iterdir()) == []  # nothing sampled, nothing probed
    assert out.stdout == ""


def _almost_full(tmpfs_mount) -> Path:
    disk = tmpfs_mount("8m").path
    (disk / "ballast").write_bytes(b"x" * (int(7.6 * MIB)))
    return disk


def test_watch_notifies_a_webhook_of_a_full_disk(tmpfs_mount) -> None:
    disk = _almost_full(tmpfs_mount)
    hook = Webhook()
    try:
        out = tw("watch", "--interval", "0.2", "--duration", "3", "--notify", hook.url, str(disk))
        bodies = hook.bodies()
    finally:
        hook.close()
    assert out.returncode == 1, out.stderr
    full = [b for b in bodies if b["code"] == "disk-almost-full"]
    assert len(full) == 1  # once, however many samples saw it
    assert full[0]["state"] == "started" and full[0]["subject"] == str(disk)
    assert full[0]["host"] == socket.gethostname() and full[0]["time"] > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_notifies_in_the_robot_format(tmpfs_mount) -> None:
    disk = _almost_full(tmpfs_mount)
    hook = Webhook(reply=b'{"code":0,"msg":"success"}')
    cmd = [sys.executable, "-m", "trainwatch_lab", "serve", "--listen"]
    cmd += [f"127.0.0.1:{_free_port()}", "--interval", "0.2", "--no-probe"]
    cmd += ["--notify", hook.url, "--notify-format", "feishu", str(disk)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        assert wait_until(lambda: hook.requests, 20), proc.stderr
        body = hook.bodies()[0]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=20)
        hook.close()
    assert proc.returncode == 0
    assert body["msg_type"] == "text"
    assert "disk-almost-full" in body["content"]["text"]
