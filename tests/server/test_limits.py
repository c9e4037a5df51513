"""Issue 24, findings 1 and 2: every input has a size limit, a refusal is one line under
1 KB that never echoes the input whole, and what the server remembers is bounded by what it
watches now. Against a real Jupyter Server (pytest-jupyter)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from tornado.httpclient import HTTPClientError

from trainwatch_lab.core.limits import PATH_MAX, REQUEST_BODY_MAX, WS_MESSAGE_MAX

from .test_handlers import API, fetch_error

ONE_LINE = 1024


def short_line(payload: dict) -> str:
    text = payload["error"]
    assert "\n" not in text and len(json.dumps(payload).encode()) < ONE_LINE
    return text


@pytest.mark.parametrize(
    "path, needle",
    [
        ("/" + "a" * PATH_MAX, "longer than"),
        ("/" + "é" * (PATH_MAX // 2 + 1), "longer than"),  # bytes count, not characters
        ("/" + "a" * (1 << 20), "longer than"),
        ("/tmp/runs\nINFO forged log line", "control character"),
        ("/tmp/\x1b[31mred", "control character"),
        ("/tmp/a\x7fb", "control character"),
        ("/tmp/a\u0085b", "control character"),
        ("/tmp/a\x00b", "control character"),
    ],
    ids=["PATH_MAX", "PATH_MAX-bytes", "1MiB", "newline", "escape", "DEL", "NEL", "NUL"],
)
async def test_a_hostile_path_is_one_short_line_and_changes_nothing(jp_fetch, hub, path, needle):
    before = hub.watched()
    raw = json.dumps({"path": path})
    big = len(raw) > REQUEST_BODY_MAX  # refused for its size before it is parsed
    for method, kwargs, want in (
        ("POST", {"body": raw}, (413, "larger than") if big else (400, needle)),
        ("DELETE", {"params": {"path": path[:8000]}}, (400, needle)),
    ):
        code, payload = await fetch_error(jp_fetch, *API, "paths", method=method, **kwargs)
        assert (code, want[1] in short_line(payload)) == (want[0], True)
        assert path[:300] not in payload["error"]
    code, payload = await fetch_error(jp_fetch, *API, "check", params={"path": path[:8000]})
    assert code == 400 and needle in short_line(payload)
    assert hub.watched() == before


async def test_a_body_over_the_limit_is_refused_before_it_is_read(jp_fetch, hub):
    before = hub.watched()
    raw = json.dumps({"path": "/tmp", "pad": "x" * REQUEST_BODY_MAX}).encode()
    for endpoint in ("paths", "check", "processes"):
        code, payload = await fetch_error(jp_fetch, *API, endpoint, method="POST", body=raw)
        assert code == 413 and str(REQUEST_BODY_MAX) in short_line(payload)
    assert hub.watched() == before


@pytest.mark.parametrize(
    "endpoint, params",
    [
        ("history", {"since": "9" * 5000}),
        ("history", {"since": "x" * 5000}),
        ("check", {"path": "/tmp", "timeout": "1" * 5000}),
        ("check", {"path": "/tmp", "probe": "y" * 5000}),
        ("snapshot", {"x" * 5000: "1"}),
        ("processes", {"pid": "7" * 5000}),
    ],
    ids=["since-digits", "since-junk", "timeout", "probe", "name", "pid"],
)
async def test_every_parameter_has_a_size_limit(jp_fetch, hub, endpoint, params):
    method = "DELETE" if endpoint == "processes" else "GET"
    code, payload = await fetch_error(jp_fetch, *API, endpoint, method=method, params=params)
    assert code == 400
    text = short_line(payload)
    assert "5" * 50 not in text and "x" * 100 not in text and "7" * 100 not in text


async def test_a_websocket_message_over_the_limit_closes_the_stream(jp_ws_fetch, hub):
    ws = await jp_ws_fetch(*API, "stream")
    try:
        await ws.write_message(json.dumps({"interval": 1, "pad": "x" * WS_MESSAGE_MAX}))
        while (message := await asyncio.wait_for(ws.read_message(), 10)) is not None:
            assert "x" * 100 not in message
        assert ws.close_code == 1009  # "message too big"
    finally:
        ws.close()


@pytest.mark.slow  # thousands of paths added and removed through the server, ~15 s
async def test_memory_of_removed_paths_is_bounded_by_what_is_watched(jp_fetch, hub, tmp_path):
    """1000 paths added and removed in rounds, each round sampled while watched: afterwards
    the history holds series of watched paths only, and the dismissed set is empty (no
    automatic role will ever bring a user's path back: nothing to remember)."""
    batch = 50
    for start in range(0, 1000, batch):
        names = [str(tmp_path / f"run{i}") for i in range(start, start + batch)]
        for name in names:
            await jp_fetch(*API, "paths", method="POST", body=json.dumps({"path": name}))
        for _ in range(200):  # until a sample recorded every one of them
            if {n for _, n, _ in hub.history.keys("path")} >= set(names):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the sampler never recorded the new paths")
        for name in names:
            await jp_fetch(*API, "paths", method="DELETE", params={"path": name})
    recorded = {n for _, n, _ in hub.history.keys("path")}
    assert recorded <= set(hub.watched())
    assert len(hub.paths._dismissed) == 0
    series = hub.history.keys()
    assert not any(key[1].startswith(str(tmp_path / "run")) for key in series)


async def test_a_dismissed_process_dir_is_remembered_only_while_the_process_wants_it(hub):
    hub._process_dirs({"/data/runs": {4242}})
    assert hub.remove_path("/data/runs")
    hub._process_dirs({"/data/runs": {4242}})  # still written by it: stays dismissed
    assert "/data/runs" not in hub.watched()
    hub._process_dirs({})  # it ended: nothing left to remember
    assert len(hub.paths._dismissed) == 0
    hub._process_dirs({"/data/runs": {5151}})  # a new run writes there: watched again
    assert "/data/runs" in hub.watched()


def test_limits_are_what_linux_allows() -> None:
    assert os.pathconf("/", "PC_PATH_MAX") == PATH_MAX


async def test_a_refused_request_costs_no_memory_of_its_input(jp_fetch, hub):
    """The 50 MiB path of the finding, in a body under tornado's limit: refused; neither the
    snapshot nor /metrics grow."""
    raw = json.dumps({"path": "/" + "a" * (50 << 20)})
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "paths", method="POST", body=raw)
    assert err.value.code == 413
    snapshot = await jp_fetch(*API, "snapshot")
    assert len(snapshot.body) < 1 << 20
