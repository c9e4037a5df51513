"""An idle Jupyter server records nothing and its sampler stops (issue 27, item 1): with no
training process, no added path, no open panel and idle kernels the recording lets go of
the sampler and looks for training every ``record_idle_check_s``; a busy kernel or a
training process found takes it again, and both moments are events on the timeline.

The pace is the hub's own: short tail, idle-after and check settings, and conditions
waited on with margins of a minute (never a sleep that races a timeout)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from tests.server.conftest import GRACE, INTERVAL
from trainwatch_lab.core.processes.discovery import Scanner, ScanResult
from trainwatch_lab.core.record import Store

CHECK_S = 0.2


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite"


@pytest.fixture
def processes() -> bool:
    return False


@pytest.fixture
def idle_stop() -> bool:
    return True


@pytest.fixture
def jp_server_config(jp_root_dir, store_file: Path, processes: bool, idle_stop: bool):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"trainwatch_lab": True}},
            "TrainWatch": {
                "interval": INTERVAL,
                "stop_grace_s": GRACE,
                "probe": False,
                "gpu": False,  # gpu-unavailable is info: not worth recording either way
                "watch_processes": processes,
                "record": True,
                "record_path": str(store_file),
                "record_every_s": INTERVAL,
                "record_tail_s": 0.5,
                "record_idle_after_s": 0.5,
                "record_idle_check_s": CHECK_S,
                "record_idle_stop": idle_stop,
            },
        }
    )


async def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait on the server's loop (never block it) until ``condition`` holds."""
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


async def recorded(hub, key: str) -> tuple[int, list[tuple[str, str]]]:
    """(points of ``key``, [(kind, text)] of the recording's events), after a flush."""
    await hub.in_executor(hub.recording.recorder.flush)

    def read() -> tuple[int, list[tuple[str, str]]]:
        store = Store(hub.recording.recorder.path, readonly=True)
        try:
            points = len(store.read([key], 0, 2e9).get(key, ([], []))[0])
            events = [(e.kind, e.text) for e in store.events(0, 2e9) if "recording" in e.kind]
            return points, events
        finally:
            store.close()

    return await hub.in_executor(read)


async def idle(hub) -> None:
    await until(lambda: hub.sampler is None and hub.lease.clients == 0, "the sampler stops")
    assert not hub.recording.holding
    checks, starts = hub.recording.checks, hub.starts
    await until(lambda: hub.recording.checks >= checks + 5, "five idle looks")
    assert hub.sampler is None and hub.starts == starts  # the looks start no sampler


@pytest.mark.kernel  # starts real IPython kernels through the server
async def test_an_idle_server_records_nothing_until_a_kernel_is_busy(
    jp_serverapp, jp_root_dir
) -> None:
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    km = jp_serverapp.kernel_manager
    key = f"path:{jp_root_dir}:free_bytes"
    kid = None
    try:
        await idle(hub)
        kid = await km.start_kernel()
        # a kernel started: the sampler runs a while so the timeline has it, then stops
        # again (a kernel that does nothing is no reason to sample)
        await until(lambda: hub.recording.holding, "a kernel started wakes it")
        await idle(hub)
        points, events = await recorded(hub, key)
        assert points == 0
        kinds = ["recording-idle", "recording-resumed", "recording-idle"]
        assert [kind for kind, _ in events] == kinds, events
        assert events[1][1] == "recording resumed: a kernel started"
        client = km.get_kernel(kid).client()
        client.start_channels()
        try:
            client.execute("import time; time.sleep(600)")
            await until(lambda: hub.recording.holding and hub.running, "a busy kernel wakes it")
            woke = time.time()
            await until(lambda: hub.latest.t > woke + 3 * INTERVAL, "samples again")
            assert str(jp_root_dir) in hub.latest.paths
        finally:
            client.stop_channels()
        points, events = await recorded(hub, key)
        assert points >= 2
        assert [kind for kind, _ in events] == [*kinds, "recording-resumed"], events
        assert events[3][1] == f"recording resumed: kernel {kid} is busy"
    finally:
        if kid is not None:
            await km.shutdown_kernel(kid, now=True)
        hub.close_now()


async def test_an_open_panel_records_and_the_recording_goes_idle_after_it_left(
    jp_serverapp, jp_ws_fetch, jp_root_dir
) -> None:
    """A panel that opens on an idle server starts the sampler (its lease) and is worth
    recording (1 s samples while someone looks); once it left, the recording goes idle
    again and the sampler stops."""
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    try:
        await idle(hub)
        ws = await jp_ws_fetch("trainwatch-lab", "api", "stream")
        try:
            await until(lambda: hub.recording.holding and hub.running, "the panel wakes it")
            await ws.read_message()  # a sample reached the panel
        finally:
            ws.close()
        await until(lambda: hub.sampler is None and not hub.recording.holding, "idle again")
        _, events = await recorded(hub, f"path:{jp_root_dir}:free_bytes")
        kinds = [kind for kind, _ in events]
        assert kinds == ["recording-idle", "recording-resumed", "recording-idle"], events
        assert events[1][1] == "recording resumed: a panel is open"
    finally:
        hub.close_now()


TRAINER = """\
import os, time
os.makedirs("runs", exist_ok=True)
events = open("runs/events.out.tfevents.1.host", "wb")  # the discovery lists it
time.sleep(600)
"""


async def wakes_since(hub, since: float) -> list[str]:
    """Why the recording woke from ``since`` on, one text per wake (after a flush)."""
    await hub.in_executor(hub.recording.recorder.flush)

    def read() -> list[str]:
        store = Store(hub.recording.recorder.path, readonly=True)
        try:
            return [e.text for e in store.events(since, 2e9, kinds=("recording-resumed",))]
        finally:
            store.close()

    return await hub.in_executor(read)


@pytest.fixture
def our_sessions(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The machine as a test sees it: only processes of the sessions listed here train.

    Discovery scans the whole machine, where other training processes come and go (other
    tests under pytest-xdist, another agent's suite, a real run): one found at the wrong
    moment keeps the recording awake or wakes it first, whatever the test does. Every pass
    (the idle look's and the sampler's) keeps what it found in these sessions only."""
    sessions: set[int] = set()
    scan = Scanner.scan

    def session(pid: int) -> int | None:
        try:
            return os.getsid(pid)
        except OSError:  # ended since the pass
            return None

    def ours_only(self: Scanner, *args: Any, **kwargs: Any) -> ScanResult:
        result = scan(self, *args, **kwargs)
        result.found = {p: f for p, f in result.found.items() if session(p) in sessions}
        return result

    monkeypatch.setattr(Scanner, "scan", ours_only)
    return sessions


@pytest.mark.parametrize("processes", [True])
async def test_a_training_process_found_by_the_idle_look_wakes_the_recording(
    jp_serverapp, tmp_path: Path, processes: bool, our_sessions: set[int]
) -> None:
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train.py").write_text(TRAINER)
    try:
        await idle(hub)
        since = time.time()
        train = subprocess.Popen(
            [sys.executable, "train.py"], cwd=tmp_path / "train", start_new_session=True
        )
        our_sessions.add(train.pid)  # its own session: the one the discovery sees
        try:
            await until(lambda: hub.recording.holding and hub.running, "the look finds it")
            woke = await wakes_since(hub, since)
            assert woke and woke[0].startswith("recording resumed: training process"), woke
            assert f"training process found: pid {train.pid} `python" in woke[0]
            assert "train.py`" in woke[0]
        finally:
            train.kill()
            train.wait(timeout=60)
    finally:
        hub.close_now()


@pytest.mark.parametrize("idle_stop", [False])
async def test_record_idle_stop_off_keeps_the_sampler_running(
    jp_serverapp, idle_stop: bool
) -> None:
    """``c.TrainWatch.record_idle_stop = False``: the sampler runs from the start, always
    (the behaviour before; the benchmark's baseline)."""
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    try:
        await until(lambda: hub.latest is not None, "a sample")
        first = hub.latest.t
        await until(lambda: hub.latest.t > first + 2.0, "two seconds of samples")
        assert hub.recording.holding and hub.running and hub.recording.checks == 0
    finally:
        hub.close_now()


def test_the_idle_settings_are_checked() -> None:
    from traitlets import TraitError

    from trainwatch_lab.server.config import ServerSettings

    for name in ("record_tail_s", "record_idle_after_s", "record_idle_check_s"):
        with pytest.raises(TraitError, match=f"TrainWatch.{name} must be positive"):
            ServerSettings(**{name: 0})
