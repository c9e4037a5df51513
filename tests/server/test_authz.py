"""Authorization beyond login: under an Authorizer that makes a user read-only (as JupyterHub
roles can), reads work and changes are refused; the number of watched paths is bounded."""

from __future__ import annotations

import json

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from .conftest import GRACE, INTERVAL


class ReadOnly(Authorizer):
    def is_authorized(self, handler, user, action, resource) -> bool:  # type: ignore[override]
        return action == "read"


@pytest.fixture
def jp_server_config(jp_root_dir):
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"trainwatch_lab": True},
                "authorizer_class": ReadOnly,
            },
            "TrainWatch": {
                "interval": INTERVAL,
                "stop_grace_s": GRACE,
                "probe": False,
                "record": False,
            },
        }
    )


async def test_read_only_user_reads_but_cannot_change_paths(jp_fetch, hub, tmp_path):
    listing = await jp_fetch("trainwatch-lab", "api", "paths")
    assert listing.code == 200
    for method, kwargs in (
        ("POST", {"body": json.dumps({"path": str(tmp_path)})}),
        ("DELETE", {"params": {"path": str(tmp_path)}}),
    ):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("trainwatch-lab", "api", "paths", method=method, **kwargs)
        assert err.value.code == 403
    assert str(tmp_path) not in hub.watched()


async def test_read_only_user_cannot_hide_or_show_a_process(jp_fetch, hub):
    listing = await jp_fetch("trainwatch-lab", "api", "processes")
    assert listing.code == 200
    for method, kwargs in (
        ("DELETE", {"params": {"pid": "1"}}),
        ("POST", {"body": json.dumps({"pid": 1})}),
    ):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("trainwatch-lab", "api", "processes", method=method, **kwargs)
        assert err.value.code == 403
    assert hub.hidden_processes() == set()
