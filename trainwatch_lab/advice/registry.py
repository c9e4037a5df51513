"""The list of detectors an Advisor runs by default: storage rules, then GPU rules; and the
ones a one-shot check runs (those marked ``@stateless``)."""

from __future__ import annotations

from .context import Detector, stateless_only
from .gpu.detectors import GPU_DETECTORS
from .gpu.health import GPU_HEALTH_DETECTORS
from .io_bound import IO_BOUND_DETECTORS
from .storage import STORAGE_DETECTORS


def all_detectors() -> list[Detector]:
    return [*STORAGE_DETECTORS, *IO_BOUND_DETECTORS, *GPU_DETECTORS, *GPU_HEALTH_DETECTORS]


def stateless_detectors() -> list[Detector]:
    """What a one-shot ``check`` can run: the rules that need only the current sample."""
    return stateless_only(all_detectors())
