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

A save that would not fit (issue 38; all off by default): ``keep=N`` lets the saver remove
its own oldest saves first, ``fallback=DIR`` saves it there instead (Lightning's
``load_checkpoint``/``remove_checkpoint`` of the path it asked for then find it there),
``on_full="wait"`` pauses the step at the save until there is room (``wait_limit_s``,
``recheck_s``), and ``notify=URL`` sends the pause to a webhook (integrations.notify).
With any of them the save decides, not the hook before it (unless the checkpoint IO is not
ours to wrap: then ``on_full="wait"`` pauses in the hook, integrations.watch).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.io import TorchCheckpointIO
except ImportError:  # pragma: no cover - the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]
    from pytorch_lightning.plugins.io import TorchCheckpointIO  # type: ignore[no-redef]

from ..core.paths.names import normalise
from ..fix.checkpoint.save import save_checkpoint
from .watch import SaveOptions, TrainingWatch

if TYPE_CHECKING:  # typing.Unpack is 3.11+; only the type checkers read it
    from typing_extensions import Unpack

__all__ = ["SafeCheckpointIO", "TrainWatchCallback", "checkpoint_dirs", "log_dirs"]


def checkpoint_bytes(obj: Any) -> int:
    """About what ``torch.save(obj)`` writes: its tensors' bytes (a first save's size,
    before there is a last one to go by)."""
    if isinstance(obj, dict):
        return sum(checkpoint_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(checkpoint_bytes(v) for v in obj)
    nbytes = getattr(obj, "nbytes", None)  # torch.Tensor, numpy arrays
    return nbytes if isinstance(nbytes, int) else 0


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's file checkpoint IO, each save through ``fix.save_checkpoint`` with the
    callback's ``options`` (keep, fallback, on_full, wait_limit_s, recheck_s)."""

    def __init__(self, inner: TorchCheckpointIO, **options: Any) -> None:
        super().__init__()
        self.inner = inner
        self.options = options
        self.moved: dict[str, str] = {}  # the path Lightning asked for -> where it landed

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None
    ) -> None:
        def write(tmp: str) -> None:
            self.inner.save_checkpoint(checkpoint, tmp, storage_options)

        expected = checkpoint_bytes(checkpoint) if self.options else None
        landed = save_checkpoint(write, path, expected_bytes=expected, **self.options)
        asked = str(save_checkpoint_path(path))
        if landed != asked:
            self.moved[asked] = landed
        else:
            self.moved.pop(asked, None)

    def _where(self, path: Any) -> Any:
        return self.moved.get(str(save_checkpoint_path(path)), path)

    def load_checkpoint(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        return self.inner.load_checkpoint(self._where(path), *args, **kwargs)

    def remove_checkpoint(self, path: Any) -> None:
        self.inner.remove_checkpoint(self._where(path))
        self.moved.pop(str(save_checkpoint_path(path)), None)


def save_checkpoint_path(path: Any) -> str:
    """A path as save_checkpoint returns it (normalised), to match what it returned."""
    return normalise(os.fspath(path))


def wrap_checkpoint_io(trainer: Any, **options: Any) -> bool:
    """Route the trainer's checkpoint files through ``save_checkpoint`` where its strategy
    writes them with plain ``TorchCheckpointIO`` (a local path, one file); True if so."""
    strategy = getattr(trainer, "strategy", None)
    current = getattr(strategy, "checkpoint_io", None)
    if isinstance(current, SafeCheckpointIO):
        current.options = options
        return True
    if type(current) is not TorchCheckpointIO:  # async, distributed, a user's own: theirs
        return False
    strategy.checkpoint_io = SafeCheckpointIO(current, **options)
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
    each checkpoint; see ``integrations.watch.TrainingWatch`` for ``on_full`` "raise" and
    "warn", and the module's doc for "wait", ``keep``, ``fallback`` and ``notify``."""

    def __init__(self, *, safe_saves: bool = True, **options: Unpack[SaveOptions]) -> None:
        super().__init__()
        self.watch = TrainingWatch(**options)
        self.save_options = self.watch.save_options
        if ("keep" in self.save_options or "fallback" in self.save_options) and not safe_saves:
            raise ValueError("keep= and fallback= act in the saves: they need safe_saves=True")
        self.safe_saves = bool(safe_saves)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.safe_saves and wrap_checkpoint_io(trainer, **self.save_options):
            # the saves decide (room, fallback, the wait); without the wrapper (asynchronous
            # or a strategy's own IO) the hook before the save waits instead
            self.watch.deferred = bool(self.save_options)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "is_global_zero", True):
            self.watch.begin(log_dirs(trainer), checkpoint_dirs(trainer))

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.watch.before_checkpoint()

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.watch.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.watch.end()
