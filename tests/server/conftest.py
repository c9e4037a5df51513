"""pytest-jupyter fixtures (a real Jupyter Server per test) with the trainwatch_lab extension."""

from __future__ import annotations

import logging

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


# -- issue 24, finding 8: a callback of ours that holds Tornado's loop 50 ms is a defect ----------
SLOW_CALLBACK_S = 0.05
OURS = "trainwatch_lab"


class SlowCallbacks(logging.Handler):
    """asyncio's debug mode logs every callback that ran longer than
    ``loop.slow_callback_duration``: "Executing <Handle ... file.py:N> took 0.120 seconds"."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("Executing "):
            self.seen.append(text)


@pytest.fixture(autouse=True)
def no_slow_callbacks_of_ours(request, jp_asyncio_loop):
    """Every server test runs its loop in asyncio's debug mode; a slow callback whose handle
    names a file of ours fails the test (jupyter's and tornado's own are reported, not
    failed: not ours to fix). The worst stall seen is kept for the report."""
    loop = jp_asyncio_loop
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK_S
    handler = SlowCallbacks()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        loop.set_debug(False)
    for text in handler.seen:
        if _seconds(text) > WORST[0]:
            WORST[:] = [_seconds(text), text]
    ours = [t for t in handler.seen if _ours(t)]
    if ours:
        pytest.fail(f"a callback of ours held the event loop: {ours[0][:400]}", pytrace=False)


WORST: list = [0.0, ""]


def _ours(text: str) -> bool:
    """Whether the slow callback runs our code: its handle's function or its task's coroutine
    is in trainwatch_lab (not merely created there: asyncio's own ``_release_waiter`` of a
    ``wait_for`` we started is asyncio's, and slow only when the machine is)."""
    return OURS in text.split(" created at ", 1)[0]


def _seconds(text: str) -> float:
    try:
        return float(text.rsplit(" took ", 1)[1].split()[0])
    except (IndexError, ValueError):
        return 0.0


def pytest_terminal_summary(terminalreporter) -> None:
    if WORST[0]:
        terminalreporter.write_line(
            f"worst event-loop stall seen: {WORST[0] * 1000:.0f} ms: {WORST[1][:300]}"
        )
