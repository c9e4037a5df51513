"""Shared pytest setup: the real-filesystem fixtures of tests/support/mounts.py for every test,
the markers of tests/support/tiers.py (``pytest -m "not slow"`` is the quick run), the lines
after the run of tests/support/summaries.py (added up over pytest-xdist workers), and a
history file of the test session's own (issue 27): a Hub, a server or a CLI run that records
without a --store never writes this machine's real history (subprocesses inherit it).

Under pytest-xdist every worker inherits the controller's environment: a history file the
controller made for itself (``TRAINWATCH_TEST_STORE`` says which) is replaced by one per
worker, so that parallel tests never read each other's recordings; one a user set is kept."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from trainwatch_lab.core.attach.wire import ENV

pytest_plugins = ["tests.support.mounts", "tests.support.tiers", "tests.support.summaries"]

if os.environ.get("TRAINWATCH_STORE") in (None, os.environ.get("TRAINWATCH_TEST_STORE")):
    _HISTORY_DIR = tempfile.mkdtemp(prefix="trainwatch-test-history-")
    atexit.register(shutil.rmtree, _HISTORY_DIR, True)
    os.environ["TRAINWATCH_STORE"] = os.path.join(_HISTORY_DIR, "history.sqlite")
    os.environ["TRAINWATCH_TEST_STORE"] = os.environ["TRAINWATCH_STORE"]


@pytest.fixture(autouse=True)
def no_attach_socket_outlives_its_test():
    """A Jupyter server started in this process names its attach socket in our environment
    (core.attach: kernels it starts inherit it). A kernel a later test starts by itself must
    never find the socket of an earlier test's server, alive or not: the name goes with the
    test that set it; one inherited from outside the run stays."""
    before = os.environ.get(ENV)
    yield
    if before is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = before
