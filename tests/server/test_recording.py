"""The Jupyter server records its history with no client connected (issue 27): a watched
path's numbers and the warnings land in the store, readable by `trainwatch-lab history`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.config import Config

from tests.server.conftest import INTERVAL
from trainwatch_lab.core.record import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite"


@pytest.fixture
def watched(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


@pytest.fixture
def jp_server_config(jp_root_dir, store_file: Path, watched: Path):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"trainwatch_lab": True}},
            "TrainWatch": {
                "interval": INTERVAL,
                "probe": False,
                "watch_processes": False,
                "record": True,
                "record_path": str(store_file),
                "record_every_s": INTERVAL,
                "record_look_every_s": INTERVAL / 2,
                "paths": [str(watched)],
            },
        }
    )


def _recorded(store_file: Path, key: str) -> int:
    if not store_file.exists():
        return 0
    store = Store(str(store_file), readonly=True)
    try:
        return len(store.read([key], 0, 2e9).get(key, ([], []))[0])
    finally:
        store.close()


async def test_the_server_records_with_nobody_looking(
    jp_serverapp, store_file: Path, watched: Path
) -> None:
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    try:
        assert hub.recording is not None and not hub.looking
        assert hub.recording.every() == INTERVAL  # record_every_s: nobody looks
        key = f"path:{watched}:free_bytes"
        # the first flush comes within record_flush_s (10 s) of the first sample; the
        # server's event loop is this test's: wait on it, never block it
        for _ in range(600):
            if _recorded(store_file, key) >= 3:
                break
            await asyncio.sleep(0.1)
        assert _recorded(store_file, key) >= 3
        assert hub.starts == 1 and hub.lease.clients == 1  # the recording holds the lease
    finally:
        hub.close_now()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainwatch_lab",
            "history",
            "--store",
            str(store_file),
            "--series",
            "path:*:free_bytes",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert out.returncode == 0 and str(watched) in out.stdout, out.stderr
