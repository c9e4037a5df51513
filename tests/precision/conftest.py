"""The precision suite's judge: every scenario says which warnings must appear and which
must not; each outcome is counted on the scoreboard (tests/support/scoreboard.py, printed as a
table after the run). A false alarm or a miss also fails its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from tests.support.scoreboard import judge_outcome
from trainwatch_lab.core.model import Alert

STORAGE_CODES = (
    "shared-mount",
    "slow-mount",
    "mount-unresponsive",
    "disk-almost-full",
    "disk-filling",
    "disk-saturated",
    "checkpoint-wont-fit",
)

Judge = Callable[..., None]


@pytest.fixture
def judge() -> Judge:
    """``judge(scenario, fired_codes, must=..., must_not=...)``: score and assert."""

    def check(
        scenario: str,
        fired: Iterable[str],
        must: Iterable[str] = (),
        must_not: Iterable[str] = STORAGE_CODES,
        alerts: Iterable[Alert] = (),
    ) -> None:
        must = set(must)
        wrong = judge_outcome(scenario, fired, must, set(must_not) - must)
        details = "\n".join(f"  {a.code}: {a.message}" for a in alerts)
        assert not wrong, f"{scenario}: {', '.join(wrong)}\n{details}"

    return check
