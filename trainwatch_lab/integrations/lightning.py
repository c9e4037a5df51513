"""Lightning: ``Trainer(callbacks=[TrainWatchCallback()])``.

At ``fit`` start the loggers' save directories and the ``ModelCheckpoint`` directories are
checked (on a daemon thread); ``on_save_checkpoint`` runs inside ``trainer.save_checkpoint``
before the file is written, so a save that will not fit is stopped there. Saves with
``save_weights_only=True`` skip the callbacks' ``on_save_checkpoint`` in Lightning, so those
are not stopped (the start check and the dashboard still warn). Only the global rank 0
measures and raises: the others have nothing to write.

Every checkpoint file is written through ``fix.save_checkpoint`` (``SafeCheckpointIO``
wraps the strategy's ``TorchCheckpointIO`` at ``setup``): a private temporary name, fsync,
one rename, a share written through the guard's helper; ``ModelCheckpoint`` keeps deciding
what to keep. Other checkpoint IO (asynchronous, a distributed strategy's own) is left
alone: it does not write one file at the path it is given when it returns.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.io import TorchCheckpointIO
except ImportError:  # pragma: no cover - the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]
    from pytorch_lightning.plugins.io import TorchCheckpointIO  # type: ignore[no-redef]

from ..fix.checkpoint import save_checkpoint
from ..fix.space import SPACE_EVERY_S
from .watch import TrainingWatch

__all__ = ["SafeCheckpointIO", "TrainWatchCallback", "checkpoint_dirs", "log_dirs"]


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's file checkpoint IO, each save through ``fix.save_checkpoint``."""

    def __init__(self, inner: TorchCheckpointIO) -> None:
        super().__init__()
        self.inner = inner

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None
    ) -> None:
        def write(tmp: str) -> None:
            self.inner.save_checkpoint(checkpoint, tmp, storage_options)

        save_checkpoint(write, path)

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.load_checkpoint(*args, **kwargs)

    def remove_checkpoint(self, path: Any) -> None:
        self.inner.remove_checkpoint(path)


def wrap_checkpoint_io(trainer: Any) -> bool:
    """Route the trainer's checkpoint files through ``save_checkpoint`` where its strategy
    writes them with plain ``TorchCheckpointIO`` (a local path, one file); True if so."""
    strategy = getattr(trainer, "strategy", None)
    current = getattr(strategy, "checkpoint_io", None)
    if type(current) is not TorchCheckpointIO:  # async, distributed, a user's own: theirs
        return False
    strategy.checkpoint_io = SafeCheckpointIO(current)
    return True


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
        self,
        *,
        on_full: str = "raise",
        check: bool = True,
        space_every: float = SPACE_EVERY_S,
        safe_saves: bool = True,
    ) -> None:
        super().__init__()
        self.watch = TrainingWatch(on_full=on_full, check=check, space_every=space_every)
        self.safe_saves = bool(safe_saves)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.safe_saves:
            wrap_checkpoint_io(trainer)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "is_global_zero", True):
            self.watch.begin(log_dirs(trainer), checkpoint_dirs(trainer))

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.watch.before_checkpoint()

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.watch.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.watch.end()
