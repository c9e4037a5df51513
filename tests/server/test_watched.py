"""The server's table of watched paths and their roles (server/watched.py)."""

from __future__ import annotations

from pathlib import Path

from trainwatch_lab.monitor import make_sampler
from trainwatch_lab.server.config import ServerSettings
from trainwatch_lab.server.hub import Hub
from trainwatch_lab.server.watched import WatchedPaths


def test_a_path_a_training_process_brought_is_owned_by_it() -> None:
    told: list[tuple[str, bool]] = []
    paths = WatchedPaths([("/srv/root", "root")])
    paths.on_change = lambda key, on: told.append((key, on))
    paths.sync("process:", [("/data/runs", "process:4242"), ("/data/runs", "process:777")])
    paths.add_user_path("/data/mine")
    assert paths.owner("/data/runs") == 777  # the lowest of the processes writing there
    assert paths.owner("/data/mine") is None and paths.owner("/srv/root") is None
    assert paths.owner("/not/watched") is None
    assert told == [("/data/runs", True), ("/data/mine", True)]
    paths.sync("process:", [])
    assert paths.owner("/data/runs") is None and ("/data/runs", False) in told


def test_a_new_writer_of_a_watched_path_is_told() -> None:
    """The owner changes while the path stays watched: told (True again), so the paths source
    reads the new writer's quota; a second process that changes no owner is not told."""
    told: list[tuple[str, bool]] = []
    paths = WatchedPaths([("/data/mine", "user")])
    paths.on_change = lambda key, on: told.append((key, on))
    paths.sync("process:", [("/data/mine", "process:4242")])
    assert told == [("/data/mine", True)] and paths.owner("/data/mine") == 4242
    paths.sync("process:", [("/data/mine", "process:4242"), ("/data/mine", "process:9999")])
    assert told == [("/data/mine", True)]  # still 4242's
    paths.sync("process:", [])
    assert told == [("/data/mine", True)] * 2 and paths.owner("/data/mine") is None
    paths.remove("/data/mine")
    assert told[-1] == ("/data/mine", False)


def test_the_hubs_paths_source_charges_each_path_to_its_writer(tmp_path: Path) -> None:
    """At the sampler's start (the paths come to it without owners) and on every change of
    writer of a path already watched as the user's."""
    early, mine = str(tmp_path / "early"), str(tmp_path / "mine")
    config = ServerSettings(watch_processes=False, probe=False, gpu=False, interval=0.2)
    hub = Hub(config)
    try:
        hub._process_dirs({early: {4242}})  # found before any sampler runs
        hub.sampler = hub._create_and_start()
        source = hub.sampler.find_source("paths")
        assert source is not None and source.owner_of(early) == 4242
        hub.add_user_path(mine)
        assert source.owner_of(mine) is None  # ours
        hub._process_dirs({early: {4242}, mine: {777}})
        assert source.owner_of(mine) == 777
        hub._process_dirs({early: {4242}})  # it ended; the user's path stays, ours again
        assert mine in hub.watched() and source.owner_of(mine) is None
    finally:
        hub.close_now()


def test_a_path_found_while_the_sampler_starts_is_sampled(tmp_path: Path) -> None:
    """The first tick reports a training process's or a kernel's directory before the event
    loop has the new sampler in hand: that path must reach the paths source (it stayed
    listed as "checking..." with no state, forever, while nothing changed its roles)."""
    early = str(tmp_path / "found-at-the-first-tick")
    config = ServerSettings(watch_processes=False, probe=False, gpu=False, interval=0.2)

    def factory(*args, **kwargs):
        sampler = make_sampler(*args, **kwargs)
        start = sampler.start

        def start_then_find():  # what the first tick's discovery does, in that window
            started = start()
            hub._process_dirs({early: {4242}})
            return started

        sampler.start = start_then_find
        return sampler

    hub = Hub(config, sampler_factory=factory)
    try:
        hub.sampler = hub._create_and_start()
        assert early in hub.watched()
        source = hub.sampler.find_source("paths")
        assert early in source.paths and source.owner_of(early) == 4242
        hub._process_dirs({})  # and gone again when the process ends
        assert early not in source.paths
    finally:
        hub.close_now()


async def test_a_sampler_that_finishes_starting_after_the_hub_closed_is_closed_too() -> None:
    """The server shuts its hub down while a request is starting the sampler (on the hub's
    executor): the sampler that comes out of that start must not run on, with no hub to
    stop it (its thread kept sampling after the server had gone)."""
    import asyncio
    import threading

    config = ServerSettings(watch_processes=False, probe=False, gpu=False, interval=0.2)
    go, made = threading.Event(), []

    def factory(*args, **kwargs):
        go.wait(60)
        made.append(make_sampler(*args, **kwargs))
        return made[-1]

    hub = Hub(config, sampler_factory=factory)
    starting = asyncio.ensure_future(hub.ensure_running())
    while hub._state_lock is None or not hub._state_lock.locked():  # starting, on the executor
        await asyncio.sleep(0.01)
    hub.close_now()
    go.set()
    try:
        await starting
    except RuntimeError as exc:  # the request that asked is told, in one line
        assert "shutting down" in str(exc)
    assert made and hub.sampler is None
    for _ in range(600):
        if not made[0].running:
            break
        await asyncio.sleep(0.05)
    assert not made[0].running
