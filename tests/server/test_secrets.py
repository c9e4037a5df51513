"""Issue 24, findings 4 and 5: secrets planted in every setting and in a training process's
command line never leave the process: not in a log line, a reply, /metrics, the stream or a
file the server writes. Against a real Jupyter Server (pytest-jupyter) and a real process."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys

import pytest
from traitlets import TraitError

from trainwatch_lab.advice.notify import check_target
from trainwatch_lab.core.processes.discovery import short_command
from trainwatch_lab.core.redact import redact
from trainwatch_lab.server.config import ServerSettings

from .test_handlers import API

SECRETS = {
    "prometheus password": "PromPassw0rd9",
    "webhook token": "NotifyT0kenPath7",
    "webhook query": "NotifyQuery8x",
    "webhook signing secret": "SECNotify0Sign",
    "hf token": "hf_Planted0123456789abcdefXYZ",
    "database password": "DbPassw0rd5",
    "api key": "PlantedKey42",
    "bearer": "BearerSecret31",
}
S = SECRETS
PROMETHEUS_URL = f"http://ops:{S['prometheus password']}@127.0.0.1:9/prom"
NOTIFY_URL = (
    f"https://127.0.0.1:9/robot/{S['webhook token']}?access_token={S['webhook query']}"
    f"#secret={S['webhook signing secret']}"
)
ARGV = [
    "--hf-token",
    S["hf token"],
    "--db",
    f"postgres://train:{S['database password']}@db.internal/runs",
    f"WANDB_API_KEY={S['api key']}",
    f"--header=Authorization: Bearer {S['bearer']}",
]
TRAIN = r"""
import os, sys, time
with open(os.path.join(sys.argv[-1], "events.out.tfevents.1700000000.host"), "ab") as f:
    while True:
        f.write(b"x"); f.flush(); time.sleep(0.2)
"""


# traitlets' debug dump of the whole config (jupyter --debug): Jupyter's, not ours (README)
JUPYTER_DEBUG = ("Config changed:",)


def leaks(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


@pytest.fixture
def jp_server_config(jp_server_config):
    settings = jp_server_config.TrainWatch
    settings.watch_processes = settings.record = True
    settings.prometheus_url, settings.prometheus_timeout_s = PROMETHEUS_URL, 0.5
    settings.notify_url, settings.notify_format = NOTIFY_URL, "dingtalk"
    return jp_server_config


@pytest.fixture
def every_log_line():
    """The text of every record any logger makes, whatever handlers it has (jupyter's
    logging config replaces them during the server's start, when the extension logs)."""
    lines: list[str] = []
    make = logging.getLogRecordFactory()

    def keep(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            lines.append(record.getMessage())
        except Exception:  # a malformed record is the logger's business
            lines.append(str(record.msg))
        return record

    logging.setLogRecordFactory(keep)
    yield lines
    logging.setLogRecordFactory(make)


@pytest.fixture
def training(tmp_path):
    logdir = tmp_path / "runs"
    logdir.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    proc = subprocess.Popen([sys.executable, str(script), *ARGV, str(logdir)])
    yield proc.pid
    proc.kill()
    proc.wait()


async def test_secrets_in_settings_and_command_lines_never_leave(
    every_log_line, training, jp_fetch, jp_ws_fetch, jp_serverapp, hub, tmp_path
):
    replies: list[str] = []
    for _ in range(150):  # discovery scans every few seconds
        listing = await jp_fetch(*API, "processes")
        replies.append(listing.body.decode())
        if any(p["pid"] == training for p in json.loads(replies[-1])["processes"]):
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("the training process was never found")
    (row,) = [p for p in json.loads(replies[-1])["processes"] if p["pid"] == training]
    assert "--hf-token" in row["command"] or "train.py" in row["command"]
    for parts, kwargs in (
        (("snapshot",), {}),
        (("history",), {}),
        (("paths",), {}),
        (("check",), {"params": {"path": str(tmp_path / "runs")}}),
        (("fleet",), {}),
        (("fleet", "range"), {"params": {"query": "disk", "minutes": "5"}}),
    ):
        response = await jp_fetch(*API, *parts, raise_error=False, **kwargs)
        replies.append(response.body.decode(errors="replace"))
    metrics = await jp_fetch("trainwatch-lab", "metrics")
    replies.append(metrics.body.decode())
    ws = await jp_ws_fetch(*API, "stream")
    try:
        replies.append(await asyncio.wait_for(ws.read_message(), 10))
    finally:
        ws.close()
    assert "train.py" not in metrics.body.decode()  # no command line in Prometheus, ever
    files = [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.stat().st_size < 1 << 20 and p.name != "train.py"
    ]
    assert [leaks(r) for r in replies] == [[]] * len(replies)
    ours = [line for line in every_log_line if not line.startswith(JUPYTER_DEBUG)]
    assert [line[:300] for line in ours if leaks(line)] == []
    assert [leaks(f) for f in files] == [[]] * len(files)
    assert any("the fleet from http://ops:***@" in line for line in every_log_line)


@pytest.mark.parametrize(
    "name, value",
    [
        ("prometheus_url", f"ftp://ops:{S['prometheus password']}@prom:9090"),
        ("prometheus_url", f"prom:9090/x/{S['webhook token']}"),
        ("notify_url", f"ftp://ops:{S['prometheus password']}@hook"),
        ("notify_url", f"hooks.example.com/services/T0/B0/{S['webhook token']}"),
        ("notify_url", f"https://hooks.example.com/services/T0/B0/{S['webhook token']} x"),
        ("notify_url", f"https://hooks.example.com/x/{S['webhook token'][:6]} {S['bearer']}"),
    ],
)
def test_a_refused_setting_never_echoes_its_secret(name, value) -> None:
    with pytest.raises(TraitError) as info:
        ServerSettings(**{name: value})
    assert leaks(str(info.value)) == [] and "\n" not in str(info.value)


def test_a_webhook_url_with_a_space_is_refused_where_it_is_given() -> None:
    """Before: accepted, then every POST failed with urllib's error quoting the path."""
    with pytest.raises(ValueError) as info:
        check_target(f"https://hooks.example.com/services/T0/B0/{S['webhook token']} x")
    assert leaks(str(info.value)) == []


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"http://ops:{S['prometheus password']}@prom:9090", "http://ops:***@prom:9090"),
        (f"https://{S['hf token']}@github.com/org/repo.git", "https://***@github.com/"),
        (f"Authorization: Bearer {S['bearer']}", "Authorization: ***"),
        (f"--api-key={S['api key']} --lr 3e-4", "--lr 3e-4"),
        (f"--password {S['database password']} --epochs 3", "--epochs 3"),
        (f"MY_SECRET={S['api key']} python train.py", "python train.py"),
        (f"AWS_CREDENTIALS='{S['api key']} x' python train.py", "python train.py"),
        (f"python train.py --resume {S['hf token']}", "python train.py --resume ***"),
        ("python train.py --data /data/imagenet/train --lr 3e-4", "/data/imagenet/train"),
        ("torchrun --nproc_per_node=8 train.py --keyframes 3", "--nproc_per_node=8"),
    ],
)
def test_redact(text, kept) -> None:
    shown = redact(text)
    assert leaks(shown) == [] and kept in shown


def test_the_command_a_row_shows_is_redacted() -> None:
    argv = ["/usr/bin/python3", "/home/u/train.py", *ARGV]
    assert leaks(short_command(argv, limit=10_000)) == []
    assert short_command(argv).startswith("python3 train.py --hf-token ***")
