"""The list of detectors an Advisor runs by default: storage rules, then GPU rules."""

from __future__ import annotations

from .advisor import Detector
from .gpu import GPU_DETECTORS
from .gpu_health import GPU_HEALTH_DETECTORS
from .io_bound import IO_BOUND_DETECTORS
from .storage import STORAGE_DETECTORS


def all_detectors() -> list[Detector]:
    return [*STORAGE_DETECTORS, *IO_BOUND_DETECTORS, *GPU_DETECTORS, *GPU_HEALTH_DETECTORS]
