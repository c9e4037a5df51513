"""pytest-jupyter fixtures (a real Jupyter Server per test) with the trainwatch_lab extension."""

from __future__ import annotations

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  (jp_fetch, jp_ws_fetch, jp_serverapp...)
from traitlets.config import Config

INTERVAL = 0.2
GRACE = 0.3


@pytest.fixture
def jp_server_config(jp_root_dir):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"trainwatch_lab": True}},
            # fast ticks and a short grace so lifecycle tests take a second, not a minute;
            # no write probes: these tests are about the endpoints, not the filesystems; no
            # process discovery: other tests' processes on this machine are no business of
            # these (tests/server/test_processes.py turns it on)
            "TrainWatch": {
                "interval": INTERVAL,
                "stop_grace_s": GRACE,
                "probe": False,
                "watch_processes": False,
                # no history on this machine's disk from every test server
                # (tests/server/test_recording.py turns it on, in a temporary file)
                "record": False,
            },
        }
    )


@pytest.fixture
def hub(jp_serverapp):
    """The extension's Hub inside the test server; its sampler is closed after the test."""
    hub = jp_serverapp.web_app.settings["trainwatch_hub"]
    yield hub
    hub.close_now()
