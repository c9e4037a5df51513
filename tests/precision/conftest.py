"""The precision suite's scoreboard: every scenario says which warnings must appear and
which must not; each outcome is counted per warning code and printed as a table at the end
of the run (true alarms, false alarms, misses). A false alarm or a miss also fails its test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import pytest

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

# code -> [true alarms, false alarms, misses, true silences]
_SCORES: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
_WRONG: list[str] = []

Judge = Callable[..., None]


def judge_outcome(
    scenario: str,
    fired: Iterable[str],
    must: Iterable[str] = (),
    must_not: Iterable[str] = (),
) -> list[str]:
    """Score one scenario; returns what it got wrong ("false alarm: slow-mount", ...)."""
    fired, must = set(fired), set(must)
    wrong = []
    for code in sorted(must | set(must_not)):
        expected, seen = code in must, code in fired
        score = _SCORES[code]
        score[(0 if seen else 2) if expected else (1 if seen else 3)] += 1
        if expected != seen:
            wrong.append(f"{'miss' if expected else 'false alarm'}: {code}")
    _WRONG.extend(f"{scenario}: {w}" for w in wrong)
    return wrong


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


def scoreboard() -> str:
    rows = [("warning code", "true alarms", "false alarms", "misses", "true silences")]
    rows += [(code, *map(str, _SCORES[code])) for code in sorted(_SCORES)]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.extend(_WRONG)
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SCORES:
        terminalreporter.write_sep("=", "precision: warnings against ground truth")
        terminalreporter.write_line(scoreboard())
