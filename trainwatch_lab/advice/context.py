"""What a detector sees (``Context``), what a detector is (``Detector``), and its one flag.

A detector is a plain function ``(ctx) -> Iterable[Alert]``. Detectors that need memory across
ticks ("for 10 s", "since when") keep it in ``ctx.state[their name]``; nothing else is shared.
One that needs only the current sample says so with ``@stateless``: a one-shot ``check`` runs
those (``stateless_only``), with no list kept by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..core.defaults import Defaults
from ..core.history import History
from ..core.model import Alert, ProbeResult, Sample


@dataclass
class Context:
    sample: Sample
    history: History
    defaults: Defaults
    baseline: ProbeResult | None  # local-disk write+fsync latency, for slow-mount ratios
    state: dict[str, Any] = field(default_factory=dict)


Detector = Callable[[Context], Iterable[Alert]]
D = TypeVar("D", bound=Callable[..., Any])


def stateless(detector: D) -> D:
    """Mark a detector that needs only the current sample: no history, no ``ctx.state``."""
    detector.stateless = True  # type: ignore[attr-defined]
    return detector


def is_stateless(detector: Detector) -> bool:
    return bool(getattr(detector, "stateless", False))


def stateless_only(detectors: Sequence[Detector]) -> list[Detector]:
    """The detectors a one-shot check can run, in their order."""
    return [d for d in detectors if is_stateless(d)]
