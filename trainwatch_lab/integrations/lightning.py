"""Lightning: ``Trainer(callbacks=[TrainWatchCallback()])``.

At ``fit`` start the loggers' save directories and the ``ModelCheckpoint`` directories are
checked (on a daemon thread); ``on_save_checkpoint`` runs inside ``trainer.save_checkpoint``
before the file is written, so a save that will not fit is stopped there. Saves with
``save_weights_only=True`` skip the callbacks' ``on_save_checkpoint`` in Lightning, so those
are not stopped (the start check and the dashboard still warn). Only the global rank 0
measures and raises: the others have nothing to write.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from ..fix.space import SPACE_EVERY_S
from .watch import TrainingWatch

__all__ = ["TrainWatchCallback", "checkpoint_dirs", "log_dirs"]


def log_dirs(trainer: Any) -> list[Any]:
    """Each logger's ``save_dir`` (its ``log_dir`` property may list the directory to pick
    a version: not ours to trigger), else the trainer's default root."""
    found = [getattr(lg, "save_dir", None) for lg in getattr(trainer, "loggers", None) or []]
    return [d for d in found if d] or [getattr(trainer, "default_root_dir", None)]


def checkpoint_dirs(trainer: Any) -> list[Any]:
    """The ``dirpath`` of every ``ModelCheckpoint`` (resolved by ``fit`` start)."""
    return [getattr(cb, "dirpath", None) for cb in getattr(trainer, "checkpoint_callbacks", [])]


class TrainWatchCallback(Callback):
    """Checks the log and checkpoint directories at ``fit`` start and the free space before
    each checkpoint; see ``integrations.watch.TrainingWatch`` for ``on_full``."""

    def __init__(
        self, *, on_full: str = "raise", check: bool = True, space_every: float = SPACE_EVERY_S
    ) -> None:
        super().__init__()
        self.watch = TrainingWatch(on_full=on_full, check=check, space_every=space_every)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "is_global_zero", True):
            self.watch.begin(log_dirs(trainer), checkpoint_dirs(trainer))

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.watch.before_checkpoint()

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.watch.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.watch.end()
