"""The recorded history (issue 27): one SQLite file per machine that survives restarts.

``location`` picks a local directory, ``store`` holds samples in compressed column blocks
(``codec``) and events, ``maintain`` keeps it bounded, ``recorder`` writes what a Sampler
sees, ``events`` and ``ended`` say what happened, ``why`` explains how a run ended and
``export`` writes a window with command lines redacted. No Jupyter module here (layering).
"""

from __future__ import annotations

from .location import Location, choose
from .recorder import Recorder
from .store import Event, Store, StoreError

__all__ = ["Event", "Location", "Recorder", "Store", "StoreError", "choose"]
