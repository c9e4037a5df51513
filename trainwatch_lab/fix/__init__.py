"""What a warning's fix is, as code: ``local_mirror`` for logs bound for a share, and
``save_checkpoint`` for saves that must fit and land whole.

Imports core and the standard library only (no advice, no Jupyter): training code and the
framework callbacks (integrations/) use it in any process. Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .background import SaveHandle, SaveInFlight, SaveSkipped, SaveStatus, checkpoint_status
    from .checkpoint import SaveUnresponsive, save_checkpoint
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
    "save_checkpoint": "checkpoint",
    "SaveUnresponsive": "checkpoint",
    "SaveHandle": "background",
    "SaveInFlight": "background",
    "SaveSkipped": "background",
    "SaveStatus": "background",
    "checkpoint_status": "background",
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
