"""What a warning's fix is, as code: ``local_mirror`` for logs bound for a share, and
``save_checkpoint`` for saves that must fit and land whole.

Two rooms: mirror/ (``local_mirror``) and checkpoint/ (``save_checkpoint``, and what the
framework callbacks use for the saves they write). Beside them, what is not one room's:
space (will the next write fit; both rooms), scratch (a private directory on a local disk;
both rooms) and report (where a warning raised by training code goes: the saves, the
framework callbacks; the notebook registers its reporter there).

Imports core and the standard library only (no advice, no Jupyter): training code and the
framework callbacks (integrations/) use it in any process. Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .checkpoint.background import (
        SaveHandle,
        SaveInFlight,
        SaveSkipped,
        SaveStatus,
        checkpoint_status,
    )
    from .checkpoint.save import SaveUnresponsive, save_checkpoint
    from .mirror.lock import ShareInUse
    from .mirror.mirror import Mirror, active_mirrors, local_mirror
    from .mirror.status import MirrorStatus
    from .space import CheckpointWontFit, SpaceWatch

_WHERE = {
    "local_mirror": "mirror.mirror",
    "Mirror": "mirror.mirror",
    "ShareInUse": "mirror.lock",
    "MirrorStatus": "mirror.status",
    "active_mirrors": "mirror.mirror",
    "save_checkpoint": "checkpoint.save",
    "SaveUnresponsive": "checkpoint.save",
    "SaveHandle": "checkpoint.background",
    "SaveInFlight": "checkpoint.background",
    "SaveSkipped": "checkpoint.background",
    "SaveStatus": "checkpoint.background",
    "checkpoint_status": "checkpoint.background",
    "CheckpointWontFit": "space",
    "SpaceWatch": "space",
}
__all__ = [
    "CheckpointWontFit",
    "Mirror",
    "MirrorStatus",
    "SaveHandle",
    "SaveInFlight",
    "SaveSkipped",
    "SaveStatus",
    "SaveUnresponsive",
    "ShareInUse",
    "SpaceWatch",
    "active_mirrors",
    "checkpoint_status",
    "local_mirror",
    "save_checkpoint",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'trainwatch_lab.fix' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
