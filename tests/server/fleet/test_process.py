"""The fleet's listing is asked of Prometheus, decoded, folded and encoded in a worker process,
not in the Jupyter server's (where a worker thread held the GIL the event loop needs: the loop
stalled 0.4-1 s per listing at 10,000 hosts, and tornado's client gunzipped the answers on
the loop, issue 26); the worker killed mid-listing fails that listing with one line, and the
next listing starts a new one. A real Jupyter Server and Debian's
Prometheus holding a backfilled synthetic cluster (tests/prometheus/fleet_synthetic)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import struct
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.prometheus.fleet_synthetic import expected, synthetic_store
from tests.support.mounts import wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.prometheus import fleet as prometheus_fleet
from trainwatch_lab.server.fleet import listing as fleet_listing
from trainwatch_lab.server.fleet.api import SETTINGS_KEY
from trainwatch_lab.server.fleet.promclient import PrometheusClient

HOSTS = 60
# the cluster is a real Prometheus (Debian's) with backfilled blocks: a service, not quick
pytestmark = pytest.mark.service
API = ("trainwatch-lab", "api", "fleet")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    store, close = synthetic_store("prometheus", tmp_path_factory.mktemp("cluster"), HOSTS)
    yield store.url
    close()


@pytest.fixture
def jp_server_config(jp_server_config, cluster):
    jp_server_config.TrainWatch.prometheus_url = cluster
    jp_server_config.TrainWatch.prometheus_timeout_s = 60.0
    return jp_server_config


def _state(pid: int) -> tuple[str, int]:
    """(state letter, parent pid) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _unread(pid: int) -> int:
    """Bytes written into the stdin pipe of ``pid`` that it has not read."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    finally:
        os.close(fd)


async def test_the_listing_is_asked_and_folded_outside_the_servers_process(jp_fetch, jp_serverapp):
    """Every call of the fold, and every query the server's own client sends, on any thread
    of the server's process, is recorded: no fold, and no instant query (the listing's
    answers never reach the server's process; the recording rules it asks for are another
    endpoint, ``rules``)."""
    watched = {prometheus_fleet.fold.__code__, fleet_listing.listing.__code__}
    http = PrometheusClient._body.__code__
    calls: list[str] = []
    asked: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in watched:
            calls.append(f"{frame.f_code.co_name} on {threading.current_thread().name}")
        elif event == "call" and frame.f_code is http:
            asked.add(frame.f_locals["endpoint"])

    threading.setprofile(profile)  # the threads started from now on (the fleet's workers)
    sys.setprofile(profile)  # and this one, the event loop's
    try:
        listing = json.loads((await jp_fetch(*API)).body)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert listing["counts"] == expected(HOSTS) and len(listing["hosts"]) == HOSTS
    assert calls == []
    assert "query" not in asked and "rules" in asked, asked
    worker = jp_serverapp.web_app.settings[SETTINGS_KEY].worker.pid()
    assert worker is not None and worker != os.getpid()
    assert _state(worker)[1] == os.getpid()  # our child, kept for the next listing
    # its fold on a thread nicer than the server (where cores are scarce the event loop runs
    # first), its HTTP at the server's priority (a starved reader keeps Prometheus waiting)
    server = _nice(f"/proc/{os.getpid()}")
    threads = [_nice(str(task)) for task in Path(f"/proc/{worker}/task").iterdir()]
    assert _nice(f"/proc/{worker}") == server
    assert min(19, server + DEFAULTS.fleet_worker_nice) in threads, threads


def _nice(proc: str) -> int:
    """The nice value of a process or thread (field 19 of its /proc/.../stat)."""
    return int(Path(f"{proc}/stat").read_text().rsplit(")", 1)[1].split()[16])


async def test_a_killed_worker_fails_its_listing_in_one_line_and_the_next_one_works(
    jp_fetch, jp_serverapp
):
    fleet = jp_serverapp.web_app.settings[SETTINGS_KEY]
    first = json.loads((await jp_fetch(*API)).body)
    worker = fleet.worker.pid()
    assert worker is not None and first["counts"] == expected(HOSTS)

    # stopped, then killed while the next listing waits on it
    os.kill(worker, signal.SIGSTOP)
    assert wait_until(lambda: _state(worker)[0] == "T", timeout=10)
    fleet._cached = None  # past the listing's cache
    listing = asyncio.ensure_future(jp_fetch(*API))
    # the listing's request is on its way: waiting in the stopped worker's pipe
    assert await asyncio.to_thread(wait_until, lambda: _unread(worker) > 0, 30)
    os.kill(worker, signal.SIGKILL)
    with pytest.raises(HTTPClientError) as info:
        await listing
    assert info.value.code == 500
    error = json.loads(info.value.response.body)["error"]
    assert error == (
        "the fleet's worker process ended (exit status -9) during the listing; "
        "the next listing starts a new one"
    )

    again = json.loads((await jp_fetch(*API)).body)  # a failure is not cached
    assert again["counts"] == expected(HOSTS)
    assert fleet.worker.pid() not in (None, worker)


async def test_a_worker_that_hangs_is_killed_within_the_timeout(jp_fetch, jp_serverapp):
    """Stopped (SIGSTOP: as good as hung), the worker is killed once the listing has waited
    twice c.TrainWatch.prometheus_timeout_s on it (Prometheus's time, then the fold's); the
    listings after it work."""
    fleet = jp_serverapp.web_app.settings[SETTINGS_KEY]
    fleet.client.timeout_s = 5.0  # as c.TrainWatch.prometheus_timeout_s = 5 would set it
    await jp_fetch(*API)
    worker = fleet.worker.pid()
    assert worker is not None
    os.kill(worker, signal.SIGSTOP)
    fleet._cached = None  # past the listing's cache
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API)
    assert info.value.code == 500
    assert json.loads(info.value.response.body)["error"] == (
        "the fleet's worker process did not finish the listing within 10 s; "
        "the next listing starts a new one"
    )
    assert not Path(f"/proc/{worker}").exists()  # killed and reaped
    again = json.loads((await jp_fetch(*API)).body)
    assert again["counts"] == expected(HOSTS) and fleet.worker.pid() not in (None, worker)


async def test_a_worker_slow_to_take_the_listing_still_gives_prometheus_its_timeout(
    jp_fetch, jp_serverapp
):
    """The Prometheus timeout counts from when the worker takes the listing, not from when
    the server asked: a worker that is still starting, or paused a moment, is no reason to
    say Prometheus "did not answer". Here the warm worker is stopped for longer than the
    whole timeout while the request waits in its pipe, then goes on."""
    fleet = jp_serverapp.web_app.settings[SETTINGS_KEY]
    # paused a little longer than the timeout, and the server kills it after twice that:
    # the rest of the listing has 9.5 s, whatever the load
    fleet.client.timeout_s = 10.0
    await jp_fetch(*API)
    worker = fleet.worker.pid()
    assert worker is not None
    os.kill(worker, signal.SIGSTOP)
    fleet._cached = None  # past the listing's cache
    listing = asyncio.ensure_future(jp_fetch(*API))
    assert await asyncio.to_thread(wait_until, lambda: _unread(worker) > 0, 30)
    await asyncio.sleep(10.5)  # past the timeout, whatever the load: the pause is all it takes
    os.kill(worker, signal.SIGCONT)
    answer = json.loads((await listing).body)
    assert answer["counts"] == expected(HOSTS) and fleet.worker.pid() == worker


def test_the_worker_imports_the_servers_own_trainwatch_lab() -> None:
    """The worker puts the folder that holds this trainwatch_lab first on its path, so it
    runs the server's code, not another copy installed elsewhere (one folder deeper since
    issue 37 moved the listing into server/fleet/)."""
    import trainwatch_lab

    assert Path(fleet_listing.ROOT, "trainwatch_lab") == Path(trainwatch_lab.__file__).parent
