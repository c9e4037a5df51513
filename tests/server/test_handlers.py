"""Every endpoint of the server extension against a real Jupyter Server (pytest-jupyter)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
from dataclasses import replace
from itertools import pairwise

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import GRACE, INTERVAL

API = ("trainwatch-lab", "api")
REST = ["snapshot", "history", "paths"]


def body(response) -> dict:
    return json.loads(response.body.decode())


async def fetch_error(jp_fetch, *parts, **kwargs) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*parts, **kwargs)
    response = info.value.response
    payload = json.loads(response.body.decode()) if response is not None and response.body else {}
    return info.value.code, payload


async def messages(ws, count: int, timeout: float = 10.0) -> list[dict]:
    out = []
    for _ in range(count):
        text = await asyncio.wait_for(ws.read_message(), timeout)
        assert text is not None, "stream closed"
        out.append(json.loads(text))
    return out


# -- authentication ------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", [*REST, "check"])
@pytest.mark.parametrize("auth", ["token wrong-token", ""])
async def test_rest_rejects_unauthenticated(jp_fetch, hub, endpoint, auth):
    code, _ = await fetch_error(
        jp_fetch, *API, endpoint, params={"path": "/"}, headers={"Authorization": auth}
    )
    assert code == 403
    assert hub.sampler is None  # nothing started for a stranger


async def test_post_and_delete_reject_unauthenticated(jp_fetch, hub, tmp_path):
    for method in ("POST", "DELETE"):
        code, _ = await fetch_error(
            jp_fetch,
            *API,
            "paths",
            method=method,
            body=json.dumps({"path": str(tmp_path)}),
            headers={"Authorization": "token wrong-token"},
            allow_nonstandard_methods=True,
        )
        assert code == 403
    assert str(tmp_path) not in hub.watched()


async def test_stream_rejects_unauthenticated(jp_ws_fetch, hub):
    with pytest.raises(HTTPClientError) as info:
        await jp_ws_fetch(*API, "stream", headers={"Authorization": "token wrong-token"})
    assert info.value.code == 403
    assert hub.clients == 0 and hub.sampler is None


async def test_query_token_login_works_on_every_endpoint(
    jp_fetch, jp_ws_fetch, jp_serverapp, hub, tmp_path
):
    """``?token=`` (the URL ``jupyter server list`` prints) with no Authorization header:
    every endpoint answers, where the token was refused as an unknown parameter."""
    login = {"token": jp_serverapp.identity_provider.token}
    bare = {"Authorization": ""}  # jp_fetch would add the server's token header otherwise
    for endpoint, params in (
        ("snapshot", {}),
        ("history", {"since": "0"}),
        ("paths", {}),
        ("check", {"path": str(tmp_path), "probe": "0"}),
    ):
        response = await jp_fetch(*API, endpoint, params={**params, **login}, headers=bare)
        assert response.code == 200, endpoint
    added = await jp_fetch(
        *API,
        "paths",
        method="POST",
        params=login,
        body=json.dumps({"path": str(tmp_path)}),
        headers=bare,
    )
    assert added.code == 201 and body(added)["added"] == str(tmp_path)
    removed = await jp_fetch(
        *API, "paths", method="DELETE", params={"path": str(tmp_path), **login}, headers=bare
    )
    assert removed.code == 200 and str(tmp_path) not in hub.watched()
    ws = await jp_ws_fetch(*API, "stream", params=login, headers=bare)
    try:
        (sample,) = await messages(ws, 1)
        assert "paths" in sample and "warnings" in sample
    finally:
        ws.close()


@pytest.mark.parametrize("endpoint", [*REST, "check"])
async def test_a_wrong_query_token_is_refused(jp_fetch, hub, endpoint):
    code, _ = await fetch_error(
        jp_fetch,
        *API,
        endpoint,
        params={"path": "/", "token": "wrong-token"},
        headers={"Authorization": ""},
    )
    assert code == 403
    assert hub.sampler is None


async def test_a_wrong_query_token_is_refused_by_the_stream(jp_ws_fetch, hub):
    with pytest.raises(HTTPClientError) as info:
        await jp_ws_fetch(
            *API, "stream", params={"token": "wrong-token"}, headers={"Authorization": ""}
        )
    assert info.value.code == 403
    assert hub.clients == 0 and hub.sampler is None


@pytest.mark.parametrize("endpoint", [*REST, "check"])
async def test_with_a_query_token_other_unknown_parameters_are_still_refused(
    jp_fetch, jp_serverapp, hub, endpoint
):
    params = {"path": "/", "token": jp_serverapp.identity_provider.token, "colour": "red"}
    code, payload = await fetch_error(
        jp_fetch, *API, endpoint, params=params, headers={"Authorization": ""}
    )
    assert code == 400 and payload == {"error": "unknown parameter 'colour'"}


# -- snapshot and history ------------------------------------------------------------------
@pytest.mark.parametrize("stop_grace_s", [60.0])  # the sampler is read after the call
async def test_snapshot_is_a_watch_json_line_with_the_root_dir(
    jp_fetch, hub, jp_root_dir, stop_grace_s
):
    data = body(await jp_fetch(*API, "snapshot"))
    assert {"t", "disks", "paths", "gpus", "warnings", "kernels"} <= set(data)
    assert str(jp_root_dir) in data["paths"]
    assert hub.running
    # the server's own process is not what the user trains: no server-process I/O
    assert data["process"] is None
    assert {s.name for s in hub.sampler.sources} >= {"paths", "disks", "kernels"}
    # what is watched and why, with every sample: the panel lists these paths and counts
    # them as its scope (its list was a copy fetched once, left showing gone paths)
    assert data["watched"] == {str(jp_root_dir): ["root"]}


async def test_snapshot_rejects_unknown_parameters(jp_fetch, hub):
    code, payload = await fetch_error(jp_fetch, *API, "snapshot", params={"x": "1"})
    assert code == 400 and "unknown parameter" in payload["error"]
    # but JupyterLab's cache buster (?<milliseconds>) is fine
    assert (await jp_fetch(*API, "snapshot", params={"1796008880850": ""})).code == 200


async def test_history_since(jp_fetch, hub):
    # each REST call renews the sampler's lease, so asking again until two samples are in
    # holds on a loaded machine, where a fixed sleep may outlast the grace and the sampler
    for _ in range(300):
        everything = body(await jp_fetch(*API, "history"))
        if len(everything["t"]) >= 2:
            break
        await asyncio.sleep(INTERVAL / 2)
    assert len(everything["t"]) >= 2
    assert all(len(col) == len(everything["t"]) for col in everything["series"].values())
    assert everything["stride"] == 1  # fewer samples than a reply's bound: every one
    cut = everything["t"][-2]
    later = body(await jp_fetch(*API, "history", params={"since": repr(cut)}))
    assert later["t"] and min(later["t"]) > cut
    # the panel decides "stale" (three intervals without a sample) from the server's interval
    assert everything["interval_s"] == later["interval_s"] == INTERVAL
    # and when this server began: the panel's "since the last server restart" (issue 27)
    assert everything["started_at"] == later["started_at"] == hub.started_at
    assert hub.started_at <= everything["t"][0]


async def test_a_history_reply_holds_at_most_the_bound_with_the_newest_in(jp_fetch, hub):
    """``history?since=0`` over a long history was a 3.2 MB reply (issue 34 item 6): the
    handler asks the history for ``history_reply_points`` samples at most, every k-th one,
    the newest always in. A bound of 3 over 9 or more samples shows it is applied."""
    for _ in range(600):
        everything = body(await jp_fetch(*API, "history"))
        if len(everything["t"]) >= 9:
            break
        await asyncio.sleep(INTERVAL / 2)
    assert len(everything["t"]) >= 9 and everything["stride"] == 1
    hub.defaults = replace(hub.defaults, history_reply_points=3)
    newest = everything["t"][-1]
    bounded = body(await jp_fetch(*API, "history", params={"since": "0"}))
    assert 2 <= len(bounded["t"]) <= 3 and bounded["stride"] >= 3, bounded["t"]
    assert bounded["t"][-1] >= newest  # the newest sample is always in
    assert all(len(col) == len(bounded["t"]) for col in bounded["series"].values())


async def test_snapshot_carries_the_headline_the_panel_and_status_bar_show(jp_fetch, hub):
    data = body(await jp_fetch(*API, "snapshot"))
    headline = data["headline"]
    assert headline["level"] in {"ok", "warning", "critical"}
    assert headline["text"] == " · ".join([headline["verdict"], *headline["facts"]])
    assert headline["brief"]


async def test_snapshot_says_each_path_s_free_space_in_the_dashboard_s_words(
    jp_fetch, hub, jp_root_dir
):
    """One space figure in every view (issue 33): the panel shows the words the notebook's
    dashboard and `watch` print for a path's space, sent with the sample, not its own sum."""
    from trainwatch_lab.advice.text import space_text
    from trainwatch_lab.core.model import path_state_from_json

    data = body(await jp_fetch(*API, "snapshot"))
    root = str(jp_root_dir)
    assert set(data["space"]) == set(data["paths"])
    said = space_text(path_state_from_json(data["paths"][root]))
    assert data["space"][root] == said and " free of " in said and "% used" in said


@pytest.mark.parametrize("since", ["yesterday", "nan", "-1", "1e99", ""])
async def test_history_rejects_junk_since(jp_fetch, hub, since):
    code, payload = await fetch_error(jp_fetch, *API, "history", params={"since": since})
    assert code == 400
    assert "since" in payload["error"]


# -- check ---------------------------------------------------------------------------------
async def test_check_of_a_path_not_created_yet_is_judged_where_it_will_be(jp_fetch, hub, tmp_path):
    pytest.importorskip("trainwatch_lab.advice.check")
    later = tmp_path / "no" / "such" / "dir"
    data = body(await jp_fetch(*API, "check", params={"path": str(later), "probe": "0"}))
    (entry,) = data["paths"]
    assert entry["path"] == str(later) and entry["verdict"] in ("ok", "shared")
    assert entry["checked_at"] == str(tmp_path)
    assert entry["note"] == f"not created yet; checked at {tmp_path}"


async def test_check_of_a_path_that_cannot_exist_is_missing(jp_fetch, hub, tmp_path):
    pytest.importorskip("trainwatch_lab.advice.check")
    (tmp_path / "notes.txt").write_text("x")
    blocked = tmp_path / "notes.txt" / "runs"
    data = body(await jp_fetch(*API, "check", params={"path": str(blocked), "probe": "0"}))
    assert [p["verdict"] for p in data["paths"]] == ["missing"]


async def test_check_of_an_existing_dir(jp_fetch, hub, tmp_path):
    pytest.importorskip("trainwatch_lab.advice.check")
    data = body(await jp_fetch(*API, "check", params={"path": str(tmp_path), "probe": "false"}))
    (entry,) = data["paths"]
    assert entry["verdict"] in ("ok", "shared", "slow")
    assert entry["total_bytes"] > 0
    assert isinstance(data["warnings"], list)


@pytest.mark.parametrize(
    "params, needle",
    [
        ({}, "missing parameter 'path'"),
        ({"path": ""}, "non-empty"),
        ({"path": "relative/dir"}, "absolute"),
        ({"path": "/tmp", "probe": "maybe"}, "probe"),
        ({"path": "/tmp", "timeout": "-3"}, "timeout"),
        ({"path": "/tmp", "color": "red"}, "unknown parameter"),
    ],
)
async def test_check_rejects_junk(jp_fetch, hub, params, needle):
    code, payload = await fetch_error(jp_fetch, *API, "check", params=params)
    assert code == 400
    assert needle in payload["error"]


# -- watched paths -------------------------------------------------------------------------
async def test_paths_add_list_remove(jp_fetch, hub, jp_root_dir, tmp_path):
    listing = body(await jp_fetch(*API, "paths"))
    assert {"path": str(jp_root_dir), "roles": ["root"]}.items() <= listing["paths"][0].items()

    new = tmp_path / "logs" / "run1"  # may not exist yet: its parent must
    (tmp_path / "logs").mkdir()
    response = await jp_fetch(*API, "paths", method="POST", body=json.dumps({"path": str(new)}))
    assert response.code == 201
    assert str(new) in [p["path"] for p in body(response)["paths"]]
    assert str(new) in hub.watched()
    # the running sampler's paths source got it too: the next samples carry its state
    for _ in range(50):
        snap = body(await jp_fetch(*API, "snapshot"))
        if str(new) in snap["paths"]:
            break
        await asyncio.sleep(INTERVAL)
    assert str(new) in snap["paths"]

    response = await jp_fetch(
        *API, "paths", method="DELETE", params={"path": str(new)}, allow_nonstandard_methods=True
    )
    assert str(new) not in [p["path"] for p in body(response)["paths"]]
    assert str(new) not in hub.watched()


async def test_add_a_path_not_created_yet_is_watched_where_it_will_be(jp_fetch, hub, tmp_path):
    """The panel accepts what the notebook and ``check`` accept: a logdir under any existing
    directory, with the note ``check`` prints; the ancestor's checkpoints are not scanned."""
    (tmp_path / "epoch=0.ckpt").write_bytes(b"w" * 1000)
    new = tmp_path / "x" / "not-yet"
    response = await jp_fetch(*API, "paths", method="POST", body=json.dumps({"path": str(new)}))
    assert response.code == 201
    data = body(response)
    assert data["added"] == str(new) and data["responsive"] is True
    assert data["note"] == f"not created yet; checked at {tmp_path}"
    for _ in range(50):
        state = body(await jp_fetch(*API, "snapshot"))["paths"].get(str(new))
        if state is not None:
            break
        await asyncio.sleep(INTERVAL)
    assert state is not None and not state["exists"] and state["checkpoints"] is None
    assert state["note"] == data["note"] and state["checked_at"] == str(tmp_path)
    assert not (tmp_path / "x").exists()


async def test_add_a_path_that_can_never_be_created_is_one_line(jp_fetch, hub, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    blocked = tmp_path / "notes.txt" / "runs"
    before = hub.watched()
    code, payload = await fetch_error(
        jp_fetch, *API, "paths", method="POST", body=json.dumps({"path": str(blocked)})
    )
    assert code == 400 and hub.watched() == before
    assert payload == {
        "error": f"{blocked} cannot exist: {tmp_path / 'notes.txt'} is a file, not a directory"
    }


async def test_delete_reads_a_path_from_the_body_but_a_pid_only_from_the_query(
    jp_fetch, hub, tmp_path
):
    """One reader serves both writes (``BaseHandler.value_from_request``) and keeps their one
    difference: DELETE paths also takes ``{"path": ...}`` in its body, DELETE processes reads
    ``?pid=`` only."""
    response = await jp_fetch(
        *API, "paths", method="POST", body=json.dumps({"path": str(tmp_path)})
    )
    assert response.code == 201 and str(tmp_path) in hub.watched()
    response = await jp_fetch(
        *API,
        "paths",
        method="DELETE",
        body=json.dumps({"path": str(tmp_path)}),
        allow_nonstandard_methods=True,
    )
    assert str(tmp_path) not in [p["path"] for p in body(response)["paths"]]
    assert str(tmp_path) not in hub.watched()
    code, payload = await fetch_error(
        jp_fetch,
        *API,
        "processes",
        method="DELETE",
        body=json.dumps({"pid": 1}),
        allow_nonstandard_methods=True,
    )
    assert code == 400 and payload["error"] == "'pid' must be a process id, got None"


async def test_delete_of_an_unwatched_path_is_404(jp_fetch, hub, tmp_path):
    code, payload = await fetch_error(
        jp_fetch, *API, "paths", method="DELETE", params={"path": str(tmp_path)}
    )
    assert code == 404 and "not watched" in payload["error"]


@pytest.mark.parametrize(
    "raw, needle",
    [
        (b"not json", "JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"path": 3}', "non-empty string"),
        (b'{"path": "relative"}', "absolute"),
        (b'{"path": "/etc/passwd/x"}', "cannot exist: /etc/passwd is a file, not a directory"),
        (b'{"path": "/dev/null"}', "/dev/null is not storage: a character device"),
        (b'{"path": "/tmp/a\\u0000b"}', "NUL"),
    ],
)
async def test_add_path_rejects_junk(jp_fetch, hub, raw, needle):
    before = hub.watched()
    code, payload = await fetch_error(jp_fetch, *API, "paths", method="POST", body=raw)
    assert code == 400
    assert needle in payload["error"]
    assert hub.watched() == before  # nothing changed


@pytest.mark.parametrize("method", ["POST", "DELETE"])
async def test_a_write_with_an_unknown_body_field_is_refused_and_changes_nothing(
    jp_fetch, hub, tmp_path, method
):
    """Issue 34: POST paths accepted any field (201) while POST check refused them: one rule,
    every write takes only what it documents."""
    before = hub.watched()
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            *API,
            "paths",
            method=method,
            body=json.dumps({"path": str(tmp_path), "colour": "red"}),
            allow_nonstandard_methods=True,
        )
    assert err.value.code == 400
    assert json.loads(err.value.response.body)["error"] == "unknown field 'colour'"
    assert hub.watched() == before


async def test_tilde_paths_are_expanded(jp_fetch, hub):
    response = await jp_fetch(*API, "paths", method="POST", body=json.dumps({"path": "~"}))
    assert body(response)["added"] == os.path.expanduser("~")


# -- stream and sampler lifecycle ----------------------------------------------------------
async def test_stream_delivers_samples_at_the_configured_interval(jp_ws_fetch, hub):
    ws = await jp_ws_fetch(*API, "stream")
    try:
        got = await messages(ws, 8)
    finally:
        ws.close()
    assert all({"t", "disks", "paths", "gpus", "warnings"} <= set(m) for m in got)
    gaps = [b["t"] - a["t"] for a, b in pairwise(got[1:])]  # the first may be a replay
    assert all(g > 0 for g in gaps)
    assert statistics.median(gaps) == pytest.approx(INTERVAL, rel=0.5)


async def test_stream_client_interval_throttles_and_junk_gets_an_error(jp_ws_fetch, hub):
    ws = await jp_ws_fetch(*API, "stream")
    try:
        await messages(ws, 1)
        ws.write_message(json.dumps({"interval": "fast"}))
        ws.write_message(json.dumps({"interval": INTERVAL * 3}))
        got = await messages(ws, 5)
    finally:
        ws.close()
    errors = [m for m in got if "error" in m]
    assert errors and "interval" in errors[0]["error"]
    samples = [m for m in got if "t" in m][1:]  # one may have been queued before the change
    gaps = [b["t"] - a["t"] for a, b in pairwise(samples)]
    assert gaps and min(gaps) >= INTERVAL * 3 * 0.9


async def test_sampler_runs_while_clients_are_connected_and_stops_after_the_last(jp_ws_fetch, hub):
    assert hub.sampler is None  # nothing runs before the first client
    first = await jp_ws_fetch(*API, "stream")
    second = await jp_ws_fetch(*API, "stream")
    await messages(first, 2)
    sampler = hub.sampler
    assert sampler is not None and sampler.running and hub.clients == 2

    first.close()
    await asyncio.sleep(GRACE * 3)
    assert hub.running and hub.clients == 1  # one client is still there
    await messages(second, 1)

    second.close()
    for _ in range(100):
        if hub.sampler is None and not sampler.running:
            break
        await asyncio.sleep(0.05)
    assert hub.sampler is None and not sampler.running and hub.clients == 0

    third = await jp_ws_fetch(*API, "stream")  # a new client starts a fresh sampler
    try:
        await messages(third, 1)
        assert hub.running and hub.starts == 2
    finally:
        third.close()


async def test_rest_use_starts_the_sampler_and_idles_it_out(jp_fetch, hub):
    starts = hub.starts
    await jp_fetch(*API, "snapshot")
    # started by the call (counted, since on a loaded machine the short grace may already
    # have stopped it again by the time this line runs)
    assert hub.starts == starts + 1
    for _ in range(400):
        if hub.sampler is None:
            break
        await asyncio.sleep(0.05)
    assert hub.sampler is None


# -- kernels -------------------------------------------------------------------------------
@pytest.mark.kernel  # starts real IPython kernels through the server
async def test_kernel_cwd_is_watched_and_its_pid_reported(jp_fetch, hub, jp_root_dir):
    sub = jp_root_dir / "project"
    sub.mkdir()
    response = await jp_fetch(  # Jupyter paths are relative to the root dir
        "api",
        "kernels",
        method="POST",
        body=json.dumps({"name": "python3", "path": "project/train.ipynb"}),
    )
    kid = body(response)["id"]
    try:
        for _ in range(100):
            snap = body(await jp_fetch(*API, "snapshot"))
            kernel = snap["kernels"].get(kid)
            if kernel and kernel["cwd"] and str(sub) in snap["paths"]:
                break
            await asyncio.sleep(INTERVAL)
        assert kernel["pid"] > 0 and kernel["cwd"] == str(sub)
        assert f"kernel:{kid}" in hub.roles()[str(sub)]
        assert str(sub) in snap["paths"]
    finally:
        await jp_fetch("api", "kernels", kid, method="DELETE")
    for _ in range(100):
        snap = body(await jp_fetch(*API, "snapshot"))
        if kid not in snap["kernels"] and str(sub) not in hub.watched():
            break
        await asyncio.sleep(INTERVAL)
    assert kid not in snap["kernels"] and str(sub) not in hub.watched()


@pytest.mark.kernel  # a session starts a real IPython kernel through the server
async def test_each_kernel_is_named_by_the_notebook_its_session_serves(jp_fetch, hub, jp_root_dir):
    """The kernels' notebooks come from the server's sessions (the table the loop owns):
    listed with the kernel, and followed when the notebook is renamed."""
    (jp_root_dir / "runs").mkdir()
    made = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps(
            {"path": "runs/train.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
        ),
    )
    session = body(made)
    kid = session["kernel"]["id"]

    async def notebook_listed(path: str) -> dict:
        for _ in range(200):
            kernel = body(await jp_fetch(*API, "snapshot"))["kernels"].get(kid) or {}
            if kernel.get("notebook") == path:
                break
            await asyncio.sleep(INTERVAL)
        return kernel

    try:
        assert (await notebook_listed("runs/train.ipynb"))["notebook"] == "runs/train.ipynb"
        await jp_fetch(
            "api",
            "sessions",
            session["id"],
            method="PATCH",
            body=json.dumps({"path": "runs/renamed.ipynb"}),
        )
        assert (await notebook_listed("runs/renamed.ipynb"))["notebook"] == "runs/renamed.ipynb"
    finally:
        await jp_fetch("api", "sessions", session["id"], method="DELETE")


# -- a hung mount ----------------------------------------------------------------------------
async def test_a_hung_mount_never_blocks_the_server(jp_fetch, hub, sshfs_mount):
    """Adding and checking a path on a frozen sshfs answers in bounded time, and the server
    keeps answering other requests meanwhile."""
    target = sshfs_mount.path / "never-looked-up"  # not in sshfs's attribute cache
    sshfs_mount.pause()
    try:
        post = asyncio.ensure_future(
            jp_fetch(*API, "paths", method="POST", body=json.dumps({"path": str(target)}))
        )
        check = asyncio.ensure_future(
            jp_fetch(*API, "check", params={"path": str(target), "timeout": "1"}, raise_error=False)
        )
        await asyncio.sleep(0.3)
        assert not post.done()  # it is waiting on the frozen mount...
        listing = body(await jp_fetch(*API, "paths"))  # ...and the loop still serves
        assert {"path", "roles", "state"} <= set(listing["paths"][0])

        added = await post
        assert added.code == 201
        assert body(added)["responsive"] is False and str(target) in hub.watched()

        checked = await check
        assert checked.code in (200, 504), checked.body
        if checked.code == 200:
            assert [p["verdict"] for p in body(checked)["paths"]] == ["unresponsive"]
        else:
            assert "did not finish" in body(checked)["error"]
    finally:
        sshfs_mount.resume()


async def test_watched_paths_are_bounded(jp_fetch, hub, tmp_path):
    limit = hub.defaults.max_watched_paths
    for i in range(limit - len(hub.watched())):
        d = tmp_path / f"d{i}"
        d.mkdir()
        hub.add_user_path(str(d))
    extra = tmp_path / "one-too-many"
    extra.mkdir()
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "trainwatch-lab", "api", "paths", method="POST", body=json.dumps({"path": str(extra)})
        )
    assert err.value.code == 400
    assert "already watching" in json.loads(err.value.response.body)["error"]
    assert str(extra) not in hub.watched()
