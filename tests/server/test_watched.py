"""The server's table of watched paths and their roles (server/watched.py)."""

from __future__ import annotations

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
