"""The Jupyter server records its history with no client connected (issue 27): a watched
path's numbers and the warnings land in the store, readable by `trainwatch-lab history`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from tests.record.test_why import connector_opens
from tests.server.conftest import INTERVAL
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.record import Store
from trainwatch_lab.server import hub as hub_module

ROOT = Path(__file__).resolve().parents[3]
FLUSH_S = 0.5


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite"


@pytest.fixture
def watched(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


@pytest.fixture
def flush_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's recorder flushes every FLUSH_S instead of every 10 s (the hub's defaults
    are DEFAULTS with the configured interval): the tests wait for flushed points, and a
    10 s wait each tells nothing more than a half-second one."""
    monkeypatch.setattr(hub_module, "DEFAULTS", replace(DEFAULTS, record_flush_s=FLUSH_S))


@pytest.fixture
def jp_server_config(jp_root_dir, store_file: Path, watched: Path, flush_often: None):
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
        # the first flush comes within record_flush_s (FLUSH_S here) of the first sample; the
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


async def _until(check, what: str, timeout_s: float = 90.0) -> None:
    """Poll ``check`` on the server's loop without blocking it (the server runs there)."""
    for _ in range(int(timeout_s / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} within {timeout_s:g} s")


async def _wait_recorded(store_file: Path, key: str) -> None:
    await _until(lambda: _recorded(store_file, key) >= 3, f"{key} recorded", 60.0)


async def test_the_recorded_endpoints_replay_the_history(
    jp_fetch, jp_serverapp, store_file: Path, watched: Path
) -> None:
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    try:
        key = f"path:{watched}:free_bytes"
        await _wait_recorded(store_file, key)
        api = ("trainwatch-lab", "api")
        chart = json.loads(
            (
                await jp_fetch(
                    *api,
                    "recorded",
                    params={"series": "path:*:free_bytes", "since": str(time.time() - 600)},
                )
            ).body
        )
        assert key in chart["series"] and len(chart["series"][key]["t"]) >= 3
        assert all(k.endswith(":free_bytes") for k in chart["series"])  # (and the root dir)
        thin = json.loads((await jp_fetch(*api, "recorded", params={"points": "2"})).body)
        assert all(len(s["t"]) <= 3 for s in thin["series"].values())  # 2 buckets (+1 edge)
        events = json.loads((await jp_fetch(*api, "recorded", "events")).body)["events"]
        assert any(e["kind"] == "warning-raised" for e in events)  # gpu-unavailable here
        assert json.loads((await jp_fetch(*api, "recorded", "why")).body) == {"endings": []}
        for params, message in (
            ({"since": "20", "until": "10"}, "'since' must be before 'until'"),
            ({"points": "1e9"}, "'points' must be between"),
            ({"verbose": "1"}, "unknown parameter 'verbose'"),
        ):
            with pytest.raises(HTTPClientError) as info:
                await jp_fetch(*api, "recorded", params=params)
            assert info.value.code == 400
            assert message in json.loads(info.value.response.body)["error"]
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*api, "recorded", headers={"Authorization": "token wrong"})
        assert info.value.code == 403
    finally:
        hub.close_now()


async def test_recorded_queries_run_one_at_a_time_off_the_hub_s_executor(
    jp_fetch, jp_serverapp, store_file: Path, watched: Path
) -> None:
    """A long replay query must not hold the hub's workers (the sampler's start and stop
    wait there): queries queue on their own single thread instead."""
    import threading

    from trainwatch_lab.server.recording import api as recorded

    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    try:
        await _wait_recorded(store_file, f"path:{watched}:free_bytes")
        release = threading.Event()
        busy = recorded.QUERIES.submit(release.wait, 120)  # a query that takes long
        try:
            api = ("trainwatch-lab", "api")
            get = asyncio.ensure_future(jp_fetch(*api, "recorded", "events"))
            # the hub's executor answers at once while the query thread is busy ...
            assert await hub.in_executor(lambda: 42, timeout=60) == 42
            # ... and the GET waits its turn (it can only be done once the thread is free)
            done, _ = await asyncio.wait([get], timeout=2.0)
            assert not done
        finally:
            release.set()
        assert busy.result(timeout=60) is True
        assert (await get).code == 200
    finally:
        hub.close_now()  # its sampler would outlive the test's loop


@pytest.mark.kernel  # starts real IPython kernels through the server
async def test_a_kernel_that_died_is_explained_by_history_why(
    jp_serverapp, store_file: Path
) -> None:
    """The third case of the issue's "done when": a kernel of this server killed (here
    with SIGKILL, as the OOM killer does) is on the recorded timeline, and `trainwatch-lab
    history why` says how it ended (the signal, where the process connector tells it)."""
    import signal

    from trainwatch_lab.server.kernels import kernel_pid

    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    km = jp_serverapp.kernel_manager
    kid = await km.start_kernel()
    try:
        pid = kernel_pid(km.get_kernel(kid))

        def kernel_listed() -> bool:
            latest = hub.latest
            return latest is not None and latest.kernels.get(kid, {}).get("pid") == pid

        for _ in range(1200):  # the server's loop: wait on it, never block it
            if kernel_listed():
                break
            await asyncio.sleep(0.05)
        assert kernel_listed()
        os.kill(pid, signal.SIGKILL)
        for _ in range(1200):
            if hub.latest.kernels.get(kid, {}).get("pid") != pid:
                break
            await asyncio.sleep(0.05)
        await hub.in_executor(hub.recording.recorder.flush)
    finally:
        await km.shutdown_kernel(kid, now=True)
        hub.close_now()
    out = subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "history", "why", "--store", str(store_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if "ended at" in line]
    print(out.stdout)  # (shown with -s: the sentence)
    assert lines and all(line.startswith("kernel ") for line in lines), out.stdout
    assert re.match(r"kernel \S+ ended at \d\d:\d\d:\d\d after \d+ s", lines[0]), out.stdout
    if os.geteuid() == 0 and connector_opens():
        assert "killed by SIGKILL" in lines[0], out.stdout


async def _wait_kernel(hub, kid: str, pid_not: int | None = None, gone: bool = False) -> int | None:
    """The kernel's pid once the sampler lists it (with another pid than ``pid_not``), or
    None once it is gone from the list (``gone``); on the server's loop, never blocking it."""
    found: list[int | None] = []

    def seen() -> bool:
        latest = hub.latest
        listed = latest.kernels.get(kid, {}).get("pid") if latest is not None else None
        if gone and latest is not None and kid not in latest.kernels:
            found.append(None)
        elif not gone and listed and listed != pid_not:
            found.append(int(listed))
        return bool(found)

    await _until(seen, f"kernel {kid} {'gone' if gone else 'listed'}", 60.0)
    return found[0]


@pytest.mark.kernel  # starts real IPython kernels through the server
async def test_a_kernel_shut_down_or_restarted_on_request_is_no_bad_end(
    jp_fetch, jp_serverapp, store_file: Path
) -> None:
    """One kernel, three ends: killed with SIGKILL (the restarter starts it again: a bad
    end, a card), restarted from the UI (POST .../restart) and shut down (DELETE): those two
    were asked, and `why` says so and counts neither as ended badly; nor a kernel culled
    as idle, nor one shut down with the server (shutdown_all). The server's stderr is
    a log file here, as under nohup or systemd: the kernels inherit it, and not one of its
    lines is quoted as a kernel's last stderr line."""
    import signal

    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    since = time.time() - 1
    saved = os.dup(2)
    with open(store_file.parent.parent / "server.log", "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        reply = await jp_fetch("api", "kernels", method="POST", body=json.dumps({}))
        kid = json.loads(reply.body)["id"]
        km = jp_serverapp.kernel_manager
        other, idle = await km.start_kernel(), await km.start_kernel()
        await _wait_kernel(hub, other)
        await _wait_kernel(hub, idle)
        first = await _wait_kernel(hub, kid)
        os.kill(first, signal.SIGKILL)
        os.write(2, b"[I ServerApp] AsyncIOLoopKernelRestarter: restarting kernel (1/5)\n")
        second = await _wait_kernel(hub, kid, pid_not=first)
        await jp_fetch("api", "kernels", kid, "restart", method="POST", body="")
        await _wait_kernel(hub, kid, pid_not=second)
        await jp_fetch("api", "kernels", kid, method="DELETE")
        await _wait_kernel(hub, kid, gone=True)
        km.cull_idle_timeout = 0  # idle for longer than that: what the culler's tick does
        await km.cull_kernel_if_idle(idle)
        await _wait_kernel(hub, idle, gone=True)
        await km.shutdown_all()  # as the server's own shutdown does
        await _wait_kernel(hub, other, gone=True)
        await hub.in_executor(hub.recording.recorder.flush)
        why = await jp_fetch(
            "trainwatch-lab",
            "api",
            "recorded",
            "why",
            params={"since": str(since), "until": str(time.time() + 1)},
        )
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        hub.close_now()
    ends = sorted(json.loads(why.body)["endings"], key=lambda e: e["t"])
    for e in ends:
        print(e["sentence"])  # (shown with -s)
    assert [(e["requested"], e["badly"]) for e in ends] == [
        (None, True),
        ("restart", False),
        ("shutdown", False),
        ("shutdown", False),
        ("shutdown", False),
    ], ends
    assert "(culled by the server after being idle" in ends[3]["sentence"], ends[3]
    assert "(the Jupyter server was shutting down" in ends[4]["sentence"], ends[4]
    assert "ended at" in ends[0]["sentence"] and "no cause seen" in ends[0]["sentence"]
    assert re.match(
        r"kernel \S+ was restarted at \d\d:\d\d:\d\d after \d+ s \(asked from JupyterLab",
        ends[1]["sentence"],
    ), ends[1]
    assert re.match(r"kernel \S+ was shut down at \d\d:\d\d:\d\d", ends[2]["sentence"]), ends[2]
    assert "no cause seen" not in ends[1]["sentence"] + ends[2]["sentence"]
    assert not any("stderr" in e["sentence"] or "Restarter" in str(e) for e in ends), ends


CLI_WATCH = [sys.executable, "-m", "trainwatch_lab", "watch", "--processes", "--record"]


def _events_of(store_file: Path, kind: str, pid: int) -> list:
    if not store_file.exists():
        return []
    store = Store(str(store_file), readonly=True)
    try:
        return [e for e in store.events(0, 2e9, kinds=(kind,)) if e.data.get("pid") == pid]
    finally:
        store.close()


@pytest.mark.kernel  # starts real IPython kernels through the server
async def test_a_kernel_a_discovery_took_for_training_ends_once_as_the_kernel(
    jp_fetch, jp_serverapp, store_file: Path, tmp_path: Path
) -> None:
    """A kernel writing TensorBoard events, seen by `trainwatch-lab watch --processes
    --record` (another recorder of the same history) as a training "python": shut down from
    the UI, it has one ending, the kernel's, asked for, no card."""
    from jupyter_client.asynchronous import AsyncKernelClient

    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    since = time.time() - 1
    logdir = tmp_path / "runs"
    logdir.mkdir()
    watch = None
    try:
        reply = await jp_fetch("api", "kernels", method="POST", body=json.dumps({}))
        kid = json.loads(reply.body)["id"]
        pid = await _wait_kernel(hub, kid)
        client: AsyncKernelClient = jp_serverapp.kernel_manager.get_kernel(kid).client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            code = f"events = open({str(logdir / 'events.out.tfevents.1.host')!r}, 'wb')"
            await client.execute_interactive(code, timeout=60)
        finally:
            client.stop_channels()
        watch = subprocess.Popen(
            [*CLI_WATCH, "--store", str(store_file), "--interval", "0.2", "--duration", "600"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # its first flush comes within record_flush_s (10 s)
        await _until(lambda: _events_of(store_file, "process-seen", pid), "the kernel seen")
        await jp_fetch("api", "kernels", kid, method="DELETE")
        await _wait_kernel(hub, kid, gone=True)
        await hub.in_executor(hub.recording.recorder.flush)
        await _until(lambda: _events_of(store_file, "process-ended", pid), "its end recorded")
        assert _events_of(store_file, "kernel-ended", pid)  # two records of one end
        why = await jp_fetch(
            "trainwatch-lab",
            "api",
            "recorded",
            "why",
            params={"since": str(since), "until": str(time.time() + 1)},
        )
    finally:
        if watch is not None:
            watch.terminate()
            watch.wait(timeout=60)
        hub.close_now()
    ends = [e for e in json.loads(why.body)["endings"] if e["pid"] == pid]
    assert len(ends) == 1, ends
    (end,) = ends
    assert end["name"] == "kernel python3" and end["requested"] == "shutdown", end
    assert end["sentence"].startswith("kernel python3 was shut down at ") and not end["badly"]
