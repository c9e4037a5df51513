"""The list of detectors an Advisor runs by default: storage rules, then GPU rules."""

from __future__ import annotations

from .advisor import Detector


def all_detectors() -> list[Detector]:
    detectors: list[Detector] = []
    try:
        from .storage import STORAGE_DETECTORS

        detectors.extend(STORAGE_DETECTORS)
    except ImportError:  # pragma: no cover - until the storage rules land
        pass
    try:
        from .gpu import GPU_DETECTORS

        detectors.extend(GPU_DETECTORS)
    except ImportError:  # pragma: no cover - until the GPU rules land
        pass
    return detectors
