"""Issue 24, finding 5, with a second Unix user for real: a server running as root finds
another user's training run (started with ``setpriv`` as that user, its logdir private, 0700,
a token in its command line). The row shows the command with the token redacted; the logdir
is watched with read-only facts (mount, device, space) and never written: no probe file."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import need
from tests.support.users import as_user, other_user

from .conftest import INTERVAL
from .test_handlers import API

TOKEN = "hf_OtherUsers0123456789abcdefXYZ"
TRAIN = r"""
import os, sys, time
with open(os.path.join(sys.argv[-1], "events.out.tfevents.1700000000.host"), "ab") as f:
    while True:
        f.write(b"x"); f.flush(); time.sleep(0.2)
"""


@pytest.fixture
def private_run() -> Iterator[tuple[int, Path]]:
    """``python3 train.py --hf-token TOKEN LOGDIR`` running as the other user, its logdir in
    a 0700 directory of theirs. Yields (pid, logdir)."""
    user = other_user()
    python = shutil.which("python3", path="/usr/bin:/bin")
    need(python is not None, "needs /usr/bin/python3 (one the other user may run)")
    top = Path(tempfile.mkdtemp(prefix="tw-users-", dir="/tmp"))
    top.chmod(0o711)
    home = top / "home"
    logdir = home / "runs"
    logdir.mkdir(parents=True)
    (home / "train.py").write_text(TRAIN)
    for p in (home, logdir, home / "train.py"):
        os.chown(p, user.pw_uid, user.pw_gid)
    home.chmod(0o700)
    proc = subprocess.Popen(
        [*as_user(user), python, str(home / "train.py"), "--hf-token", TOKEN, str(logdir)]
    )
    try:
        yield proc.pid, logdir
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def jp_server_config(jp_server_config):
    settings = jp_server_config.TrainWatch
    settings.probe = settings.watch_processes = settings.record = True
    # other tests' runs on this machine must not crowd this one out of the rows
    settings.max_processes, settings.max_process_paths = 64, 48
    return jp_server_config


async def test_another_users_run_is_shown_redacted_and_its_dir_never_written(
    private_run, jp_fetch, jp_ws_fetch, hub
):
    pid, logdir = private_run
    stream = await jp_ws_fetch(*API, "stream")  # the sampler runs throughout, never restarts
    state = None
    for _ in range(300):
        snapshot = json.loads((await jp_fetch(*API, "snapshot")).body)
        state = snapshot["paths"].get(str(logdir))
        rows = [p for p in snapshot["processes"] if p["pid"] == pid]
        if state is not None and state["probe"] is not None and rows:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail(
            f"the other user's run was never found and looked at: {state}, "
            f"{snapshot['processes']}, {list(snapshot['paths'])}, {os.listdir(logdir)}"
        )
    listing = json.loads((await jp_fetch(*API, "processes")).body)
    (row,) = rows
    assert TOKEN not in json.dumps(listing) and "--hf-token ***" in row["command"]
    assert state["total_bytes"] and state["mountpoint"]  # read-only facts are there
    assert state["probe"]["samples"] == 0 and state["probe"]["p50_ms"] is None, state
    stamp = os.stat(logdir).st_mtime_ns  # the run's event file exists by now
    await asyncio.sleep(INTERVAL * 5)
    assert os.stat(logdir).st_mtime_ns == stamp
    assert os.listdir(logdir) == ["events.out.tfevents.1700000000.host"]
    stream.close()
