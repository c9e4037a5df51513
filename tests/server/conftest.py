"""pytest-jupyter fixtures (a real Jupyter Server per test) with the trainwatch_lab extension."""

from __future__ import annotations

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  (jp_fetch, jp_ws_fetch, jp_serverapp...)
from traitlets.config import Config

from tests.support.loopcheck import callbacks_over, note_worst, ours

INTERVAL = 0.2
GRACE = 0.3


@pytest.fixture
def stop_grace_s() -> float:
    """The sampler's grace after a REST call; a test that reads the running sampler after
    one takes a long one (parametrize it), or a loaded machine may have stopped it already."""
    return GRACE


@pytest.fixture
def jp_server_config(jp_root_dir, stop_grace_s: float):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"trainwatch_lab": True}},
            # fast ticks and a short grace so lifecycle tests take a second, not a minute;
            # no write probes: these tests are about the endpoints, not the filesystems; no
            # process discovery: other tests' processes on this machine are no business of
            # these (tests/server/test_processes.py turns it on)
            "TrainWatch": {
                "interval": INTERVAL,
                "stop_grace_s": stop_grace_s,
                "probe": False,
                "watch_processes": False,
                # no history on this machine's disk from every test server
                # (tests/server/recording/test_recorder.py turns it on, in a temporary file)
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


# -- issue 24, finding 8: a callback of ours that holds Tornado's loop 50 ms is a defect ----------
SLOW_CALLBACK_S = 0.05


@pytest.fixture(autouse=True)
def no_slow_callbacks_of_ours(jp_asyncio_loop):
    """Every callback the server tests' loop runs is timed in the loop thread's CPU time
    (tests/support/loopcheck.py): one of ours that computes for 50 ms holds every notebook's
    requests that long, whatever the machine, and fails the test; jupyter's and tornado's own
    are reported, not failed. The worst is kept for the line after the run."""
    with callbacks_over(SLOW_CALLBACK_S) as seen:
        yield seen
    note_worst(seen)
    mine = [(spent, text) for spent, text in seen if ours(text)]
    if mine:
        spent, text = mine[0]
        pytest.fail(
            f"a callback of ours computed {spent * 1000:.0f} ms on the event loop: {text[:400]}",
            pytrace=False,
        )
