"""Training that runs outside the notebook (issue 14), for real: a script started detached
(``setsid -f``: not a kernel, not a child of the server) writes a TensorBoard-style event file on
an sshfs share with an fsync every 100 ms. The server finds it, watches its logdir (shared-mount),
sees the share stop answering (mount-unresponsive), lets the panel hide it, and lets it go when
it ends. With the fake NVML holding memory for that pid at 0 %, a server in its own process (the
fake library must be loaded at its start) says gpu-stalled, naming the process, the blocked
system call and the file."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from tests.core.fake_nvml import GIB, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from tests.support.env import need, need_root, need_tool
from tests.support.lab import LabServer, free_port
from trainwatch_lab.core.defaults import DEFAULTS

from .test_handlers import API, body, fetch_error

__all__ = ["fake_nvml", "fake_nvml_lib"]  # fixtures

# The run: its pid first (a detached process has no Popen to ask), then a log record per step.
TRAIN = r"""
import os, sys, time
logdir, pidfile = sys.argv[1], sys.argv[2]
with open(pidfile + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(pidfile + ".tmp", pidfile)
with open(os.path.join(logdir, "events.out.tfevents.1700000000.host"), "ab") as f:
    while True:
        f.write(b"x" * 64)
        f.flush()
        os.fsync(f.fileno())
        time.sleep(0.1)
"""


@contextlib.contextmanager
def detached_run(logdir: Path, tmp_path: Path, source: str = TRAIN) -> Iterator[int]:
    """``python train.py LOGDIR --lr 3e-4`` started with ``setsid -f``: its parent exits at
    once, so it is nobody's child here. Yields its pid; killed (by pid) at the end.
    ``source``: the script (its first two arguments: the logdir and where to write its pid)."""
    script, pidfile = tmp_path / "train.py", tmp_path / "train.pid"
    script.write_text(source)
    setsid = need_tool("setsid")
    subprocess.run(
        [setsid, "-f", sys.executable, str(script), str(logdir), str(pidfile), "--lr", "3e-4"],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
    )
    deadline = time.monotonic() + 15
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the detached run never started"
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def codes(sample: dict[str, Any]) -> set[tuple[str, str]]:
    return {(w["code"], w["subject"]) for w in sample["warnings"]}


def row(sample: dict[str, Any], pid: int) -> dict[str, Any] | None:
    return next((p for p in sample.get("processes", []) if p["pid"] == pid), None)


# -- in the test's own server (pytest-jupyter) ----------------------------------------------
@pytest.fixture
def jp_server_config(jp_root_dir):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"trainwatch_lab": True}},
            "TrainWatch": {
                "interval": 0.2,
                "stop_grace_s": 5.0,
                "probe": False,
                "record": False,
            },
        }
    )


async def poll(jp_fetch, predicate: Callable[[dict], bool], timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sample = body(await jp_fetch(*API, "snapshot"))
        if predicate(sample):
            return sample
        await asyncio.sleep(0.2)
    return None


async def test_a_detached_run_on_a_share_is_found_watched_hidden_and_let_go(
    jp_fetch, hub, sshfs_mount, tmp_path
):
    need_root()
    logdir = str(sshfs_mount.path)
    with detached_run(sshfs_mount.path, tmp_path) as pid:
        # within a few seconds: the process, its logdir, and the share's warning
        found = await poll(
            jp_fetch,
            lambda s: row(s, pid) and ("shared-mount", logdir) in codes(s),
            timeout=15,
        )
        assert found is not None, "the detached run was not found with shared-mount"
        entry = row(found, pid)
        assert entry["command"].startswith("python") and " train.py " in entry["command"]
        assert "event file" in entry["reasons"]
        want = f"pid {pid} `{entry['command']}`, event file"
        assert want in entry["paths"][logdir]
        assert want in found["paths"][logdir]["labels"]
        assert found["paths"][logdir]["fstype"] == "fuse.sshfs"
        assert f"process:{pid}" in hub.roles()[logdir]

        # hidden in the panel: no row, its directories go; shown again: back
        listing = body(await jp_fetch(*API, "processes", method="DELETE", params={"pid": pid}))
        assert pid in listing["hidden"]
        hidden = await poll(jp_fetch, lambda s: not row(s, pid), timeout=5)
        assert hidden is not None and logdir not in hub.watched()
        await jp_fetch(*API, "processes", method="POST", body=json.dumps({"pid": pid}))
        assert await poll(jp_fetch, lambda s: row(s, pid) and logdir in s["paths"], 10)

        # the share's server stops: the path says so, the run's main thread is stuck on it
        sshfs_mount.pause()
        try:
            stuck = await poll(
                jp_fetch,
                lambda s: (
                    ("mount-unresponsive", logdir) in codes(s)
                    and (row(s, pid) or {}).get("main_thread", {}).get("blocked")
                ),
                timeout=20,
            )
            assert stuck is not None, "no mount-unresponsive for the paused share"
            main = row(stuck, pid)["main_thread"]
            assert main["syscall"] in {"write", "fsync"}
            assert main["fd_path"].startswith(logdir + "/events.out.tfevents")
            # ... and its row says the time it loses there (issue 15: the panel's rows)
            lost = await poll(
                jp_fetch,
                lambda s: (
                    ((row(s, pid) or {}).get("io") or {}).get("waits", {}).get(logdir, 0) >= 0.5
                ),
                timeout=20,
            )
            assert lost is not None, "the run's row never said the time it lost to the share"
            assert row(lost, pid)["io"]["waits_window"][logdir] > 0
        finally:
            sshfs_mount.resume()
        os.kill(pid, signal.SIGKILL)
        assert await asyncio.to_thread(lambda: _wait(lambda: gone(pid), 10))
        # it ended: its row goes, and its logdir with it
        left = await poll(jp_fetch, lambda s: not row(s, pid) and logdir not in s["paths"], 10)
        assert left is not None and logdir not in hub.watched()


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


async def test_the_processes_endpoint_refuses_junk(jp_fetch, hub):
    code, payload = await fetch_error(
        jp_fetch, *API, "processes", method="DELETE", params={"pid": "abc"}
    )
    assert code == 400 and "'pid' must be a process id" in payload["error"]
    code, payload = await fetch_error(
        jp_fetch, *API, "processes", method="DELETE", params={"pid": "1"}
    )
    assert code == 404 and payload["error"] == "no training process 1 is listed"
    code, _ = await fetch_error(
        jp_fetch, *API, "processes", method="POST", body=json.dumps({"pid": True})
    )
    assert code == 400
    listing = body(await jp_fetch(*API, "processes"))
    assert set(listing) == {"processes", "hidden"}


# -- a server in its own process, over the fake NVML ------------------------------------------
# what the server's defaults become: a stall is called after 3 s, NVML's process list is read
# twice a second, a dead mount is called after 1 s
OVERRIDES = {"gpu_stalled_for_s": 3.0, "gpu_processes_every_s": 0.5, "mount_timeout_s": 1.0}
LAUNCH = r"""
import dataclasses, json, sys
import trainwatch_lab.core.defaults as d
d.DEFAULTS = dataclasses.replace(d.DEFAULTS, **json.loads(sys.argv[1]))
from jupyter_server.serverapp import ServerApp
ServerApp.launch_instance(argv=sys.argv[2:])
"""


@contextlib.contextmanager
def server_process(root: Path, env: dict[str, str]) -> Iterator[LabServer]:
    """``jupyter server`` with the extension, its defaults patched before it loads them."""
    assert dataclasses.replace(DEFAULTS, **OVERRIDES)  # real fields
    port, token = free_port(), uuid.uuid4().hex
    state = root.parent / "server-state"
    state.mkdir()
    log_path = state / "server.log"
    cmd = [sys.executable, "-c", LAUNCH, json.dumps(OVERRIDES)]
    cmd += [f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0"]
    cmd += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    cmd += ["--ServerApp.open_browser=False", "--allow-root", "--TrainWatch.interval=0.5"]
    cmd += ["--TrainWatch.probe=False", "--TrainWatch.stop_grace_s=60"]
    env = {**env, "JUPYTER_RUNTIME_DIR": str(state / "runtime"), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = LabServer(f"http://127.0.0.1:{port}/", token, root, log_path, proc)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the server exited:\n{server.log()}"
            try:
                server.api("api/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert time.monotonic() < deadline, f"the server did not answer:\n{server.log()}"
                time.sleep(0.3)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def wait_snapshot(server: LabServer, predicate, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sample = server.api("trainwatch-lab/api/snapshot", timeout=20)
        if predicate(sample):
            return sample
        time.sleep(0.25)
    return None


def test_gpu_stalled_names_the_detached_run_its_syscall_and_its_file(
    sshfs_mount, fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    need_root()
    need(shutil.which("setsid") is not None, "needs setsid (util-linux)")
    logdir = str(sshfs_mount.path)
    root = tmp_path / "root"
    root.mkdir()
    fake_nvml.write([gpu(0, util=85)])
    with (
        server_process(root, fake_nvml.env()) as server,
        detached_run(sshfs_mount.path, tmp_path) as pid,
    ):
        fake_nvml.write([gpu(0, util=85, procs={pid: 3 * GIB})])
        busy = wait_snapshot(
            server,
            lambda s: (row(s, pid) or {}).get("gpu_mem_bytes") == 3 * GIB and logdir in s["paths"],
            timeout=30,
        )
        assert busy is not None, f"the run was never listed with its GPU memory:\n{server.log()}"
        entry = row(busy, pid)
        assert entry["reasons"][:2] == ["gpu", "event file"] and entry["gpus"] == [0]
        assert "gpu-stalled" not in {c for c, _ in codes(busy)}

        sshfs_mount.pause()
        try:
            fake_nvml.write([gpu(0, util=0, procs={pid: 3 * GIB})])
            stalled = wait_snapshot(
                server, lambda s: ("gpu-stalled", "GPU 0") in codes(s), timeout=40
            )
        finally:
            sshfs_mount.resume()
    assert stalled is not None, "gpu-stalled never fired"
    alert = next(w for w in stalled["warnings"] if w["code"] == "gpu-stalled")
    message = alert["message"]
    print(message, alert["fix"], sep="\n")
    # the process by pid and command, its GPU memory, the blocked call and the file on the share
    assert message.startswith(f"pid {pid} (`python") and "train.py" in message
    assert " holds 3 GiB on GPU 0 at 0 % for " in message
    assert "its main thread is blocked in " in message
    blocked = message.split("its main thread is blocked in ", 1)[1]
    assert blocked.split("()", 1)[0] in {"write", "fsync"}
    assert f"() of {logdir}/events.out.tfevents" in blocked and "(fuse.sshfs)" in blocked
    assert "local disk" in alert["fix"]
