"""Issue 24, finding 3: nothing that writes is reachable by GET. ``GET check`` never probes;
the write probe is ``POST check``, which passes jupyter_server's XSRF check and the
Authorizer's ``write`` action. Tested against a real server (pytest-jupyter) with a real
read-only Authorizer; "nothing written" is the directory's mtime (a probe file created and
removed changes it)."""

from __future__ import annotations

import json
import os

import pytest
from jupyter_server.auth.authorizer import Authorizer
from traitlets.config import Config

from .conftest import GRACE, INTERVAL
from .test_handlers import API, body, fetch_error


class ReadOnly(Authorizer):
    def is_authorized(self, handler, user, action, resource) -> bool:  # type: ignore[override]
        return action == "read"


def _config(authorizer: type[Authorizer] | None) -> Config:
    server = {"jpserver_extensions": {"trainwatch_lab": True}}
    if authorizer is not None:
        server["authorizer_class"] = authorizer
    # probe=True is the default a user gets: a GET must not write even then
    trainwatch = {"interval": INTERVAL, "stop_grace_s": GRACE, "probe": True}
    return Config({"ServerApp": server, "TrainWatch": {**trainwatch, "watch_processes": False}})


@pytest.fixture
def logdir(tmp_path):
    """A directory of its own (pytest-jupyter keeps its runtime and config in tmp_path)."""
    path = tmp_path / "logs"
    path.mkdir()
    return path


def stamp(directory) -> int:
    return os.stat(directory).st_mtime_ns


class TestReadOnlyUser:
    @pytest.fixture
    def jp_server_config(self, jp_root_dir):
        return _config(ReadOnly)

    async def test_get_check_with_probe_writes_nothing(self, jp_fetch, hub, logdir):
        before = stamp(logdir)
        code, payload = await fetch_error(
            jp_fetch, *API, "check", params={"path": str(logdir), "probe": "true"}
        )
        assert code == 400 and "POST" in payload["error"]
        assert stamp(logdir) == before

    async def test_get_check_without_probe_answers_and_writes_nothing(self, jp_fetch, hub, logdir):
        before = stamp(logdir)
        data = body(await jp_fetch(*API, "check", params={"path": str(logdir)}))
        assert [p["probe"] for p in data["paths"]] == [None]
        assert stamp(logdir) == before

    async def test_post_check_is_a_write_the_read_only_user_may_not_do(self, jp_fetch, hub, logdir):
        before = stamp(logdir)
        code, _ = await fetch_error(
            jp_fetch, *API, "check", method="POST", body=json.dumps({"path": str(logdir)})
        )
        assert code == 403
        assert stamp(logdir) == before


class TestWriter:
    @pytest.fixture
    def jp_server_config(self, jp_root_dir):
        return _config(None)

    async def test_post_check_probes(self, jp_fetch, hub, logdir):
        before = stamp(logdir)
        reply = await jp_fetch(*API, "check", method="POST", body=json.dumps({"path": str(logdir)}))
        (entry,) = body(reply)["paths"]
        assert entry["probe"] is not None and entry["probe"]["samples"] > 0
        assert stamp(logdir) != before  # it did write (and removed its file)
        assert os.listdir(logdir) == []

    async def test_post_check_without_probe_writes_nothing(self, jp_fetch, hub, logdir):
        before = stamp(logdir)
        reply = await jp_fetch(
            *API,
            "check",
            method="POST",
            body=json.dumps({"path": str(logdir), "probe": False, "timeout": 5}),
        )
        assert [p["probe"] for p in body(reply)["paths"]] == [None]
        assert stamp(logdir) == before

    @pytest.mark.parametrize(
        "payload, needle",
        [
            ({}, "'path'"),
            ({"path": "rel"}, "absolute"),
            ({"path": "/tmp", "probe": "yes"}, "'probe'"),
            ({"path": "/tmp", "timeout": 0}, "'timeout'"),
            ({"path": "/tmp", "colour": "red"}, "unknown field 'colour'"),
        ],
    )
    async def test_post_check_refuses_junk(self, jp_fetch, hub, payload, needle):
        code, reply = await fetch_error(
            jp_fetch, *API, "check", method="POST", body=json.dumps(payload)
        )
        assert code == 400 and needle in reply["error"]

    async def test_post_check_without_the_xsrf_token_is_refused(
        self, jp_fetch, jp_serverapp, hub, logdir
    ):
        """A browser's cookie alone (what a cross-site form or fetch carries) is not enough:
        jupyter_server wants the _xsrf token of a page it served."""
        jp_serverapp.web_app.settings["xsrf_cookies"] = True
        cookie = await _login_cookie(jp_fetch, jp_serverapp)
        before = stamp(logdir)
        code, _ = await fetch_error(
            jp_fetch,
            *API,
            "check",
            method="POST",
            body=json.dumps({"path": str(logdir)}),
            headers={"Authorization": "", "Cookie": cookie},
        )
        assert code == 403
        assert stamp(logdir) == before


async def _login_cookie(jp_fetch, jp_serverapp) -> str:
    """The login cookie a browser gets from ``?token=`` (as the printed URL gives it)."""
    token = jp_serverapp.identity_provider.token
    reply = await jp_fetch("api", "status", params={"token": token}, headers={"Authorization": ""})
    cookies = reply.headers.get_list("Set-Cookie")
    return "; ".join(c.split(";", 1)[0] for c in cookies)
