"""The warnings one ``%%trainwatch`` cell saw, one entry per condition (code + subject).

The summary listed each warning as the cell first saw it: the numbers of its first moment
("22 MiB left, full in about 7.3 s" for a fill that ended at 1 MiB), no word of how long it
lasted, and nothing told a warning raised once from one that cleared and came back. Here
each condition keeps its worst severity with that severity's latest sentence, when it was
first and last seen, how many times it was raised, and whether it was still raised at the
cell's last sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...advice.text import fmt_duration
from ...core.model import SEVERITY_RANK, Alert
from ..ticks import clock_label


@dataclass
class CellWarning:
    """One condition as the cell saw it."""

    alert: Alert  # at its worst severity, the latest sentence at that severity
    first_t: float
    last_t: float
    raises: int = 1
    active: bool = True  # still raised at the cell's last sample

    def span_text(self) -> str:
        """``raised twice, 14:05:02-14:05:11 (9 s), cleared``."""
        times, until = clock_label(self.first_t, 1), clock_label(self.last_t, 1)
        if until != times:
            times += f"–{until}"
        if self.last_t > self.first_t:
            times += f" ({fmt_duration(self.last_t - self.first_t)})"
        raised = {1: "raised", 2: "raised twice"}.get(self.raises, f"raised {self.raises} times")
        return f"{raised} {times}, {'still active' if self.active else 'cleared'}"


class WarningLog:
    """Fed each sample's warnings in order (the sampler's thread); ``entries()`` at the end."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], CellWarning] = {}
        self._now: set[tuple[str, str]] = set()  # raised at the last sample

    def observe(self, t: float, alerts: Iterable[Alert]) -> None:
        now = {a.key: a for a in alerts if a.severity != "info"}  # info is a note
        for key, a in now.items():
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = CellWarning(a, t, t)
                continue
            seen.last_t = t
            seen.raises += key not in self._now
            if SEVERITY_RANK[a.severity] >= SEVERITY_RANK[seen.alert.severity]:
                seen.alert = a
        for key, seen in self._seen.items():
            seen.active = key in now
        self._now = set(now)

    def entries(self) -> list[CellWarning]:
        """Worst first, then by code and subject (as every list of warnings)."""
        return sorted(
            self._seen.values(),
            key=lambda w: (-SEVERITY_RANK[w.alert.severity], w.alert.code, w.alert.subject),
        )

    def alerts(self) -> list[Alert]:
        return [w.alert for w in self.entries()]
