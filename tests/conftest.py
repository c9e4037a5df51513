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

pytest_plugins = ["tests.support.mounts", "tests.support.tiers", "tests.support.summaries"]

if os.environ.get("TRAINWATCH_STORE") in (None, os.environ.get("TRAINWATCH_TEST_STORE")):
    _HISTORY_DIR = tempfile.mkdtemp(prefix="trainwatch-test-history-")
    atexit.register(shutil.rmtree, _HISTORY_DIR, True)
    os.environ["TRAINWATCH_STORE"] = os.path.join(_HISTORY_DIR, "history.sqlite")
    os.environ["TRAINWATCH_TEST_STORE"] = os.environ["TRAINWATCH_STORE"]
