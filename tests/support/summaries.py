"""The lines printed after the run from what the tests counted as they ran: the precision
suite's scoreboard (tests/support/scoreboard.py) and the server tests' worst event-loop
callback (tests/support/loopcheck.py). Under pytest-xdist the counts live in the workers,
which print nothing: each hands its counts to the controller, which adds them up and prints
them once, as a serial run does (loaded by tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import loopcheck, scoreboard

KEY = "trainwatch_summaries"


def pytest_sessionfinish(session: pytest.Session) -> None:
    sent = getattr(session.config, "workeroutput", None)
    if sent is not None:  # a pytest-xdist worker: its counts go to the controller
        sent[KEY] = {"scores": scoreboard.export(), "loop": list(loopcheck.WORST)}


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, called in the controller only
def pytest_testnodedown(node: Any, error: object) -> None:
    got = getattr(node, "workeroutput", {}).get(KEY)
    if got:
        scoreboard.merge(got["scores"])
        loopcheck.merge_worst(got["loop"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    table = scoreboard.scoreboard()
    if table:
        terminalreporter.write_sep("=", "precision: warnings against ground truth")
        terminalreporter.write_line(table)
    line = loopcheck.worst_line()
    if line:
        terminalreporter.write_line(line)
