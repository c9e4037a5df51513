"""The Advisor runs every detector over the newest Sample and its History.

Detectors and their ``Context`` are described in ``context.py``; the default list is
``registry.all_detectors()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from ..core.history import History
from ..core.model import SEVERITY_RANK, Alert, ProbeResult, Sample
from ..core.storage.fill import PastReadings, fill_filesystems
from .context import Context, Detector
from .headline import headline
from .registry import all_detectors

__all__ = ["Advisor", "Context", "Detector"]  # Context, Detector: their old home, kept


class Advisor:
    """Callable as the Sampler's ``evaluate``; returns the warnings, most severe first."""

    def __init__(
        self,
        detectors: Sequence[Detector] | None = None,
        defaults: Defaults = DEFAULTS,
        baseline: Callable[[], ProbeResult | None] | None = None,
        past: PastReadings | None = None,
        given: Callable[[], Sequence[Alert]] | None = None,
    ) -> None:
        """``given``: warnings judged elsewhere (an attached kernel's: its server's, on the
        same sample), joined with this Advisor's own; the fill of each filesystem then
        comes with the sample too, and is not worked out again here."""
        self.given = given
        if detectors is None:
            detectors = all_detectors()
        self.detectors = list(detectors)
        self.defaults = defaults
        self._baseline = baseline
        self.past = past  # recorded free space older than the history (core.storage.fill.with_past)
        self._state: dict[str, Any] = {}

    def __call__(self, sample: Sample, history: History) -> list[Alert]:
        return self.evaluate(sample, history)

    def evaluate(self, sample: Sample, history: History) -> list[Alert]:
        # derived once, before any rule reads it, and sent with the sample to every surface
        if self.given is None:
            fill_filesystems(sample, history, self.defaults, self.past)
        ctx = Context(
            sample=sample,
            history=history,
            defaults=self.defaults,
            baseline=self._baseline() if self._baseline else None,
            state=self._state,
        )
        alerts: dict[tuple[str, str], Alert] = {}
        for alert in self.given() if self.given is not None else ():
            alerts.setdefault(alert.key, alert)
        for detector in self.detectors:
            for alert in detector(ctx):
                alerts.setdefault(alert.key, alert)
        ordered = sorted(
            alerts.values(), key=lambda a: (-SEVERITY_RANK[a.severity], a.code, a.subject)
        )
        # the words every surface opens with
        sample.headline = headline(sample, ordered, history, self.defaults)
        return ordered
