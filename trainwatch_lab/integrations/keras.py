"""Keras 3: ``model.fit(..., callbacks=[TrainWatchCallback(ckpt), ckpt])``.

A Keras callback never sees the other callbacks of ``fit``, so it is handed what to watch:
``ModelCheckpoint`` (the directory of its ``filepath`` pattern), ``BackupAndRestore``
(``backup_dir``), ``TensorBoard`` (``log_dir``) or plain paths (checked, and watched for
space like a checkpoint directory). Keras calls callbacks in list order, so put this one
before the checkpoint callbacks: its ``on_epoch_end``/``on_train_batch_end`` then runs
before their save.
"""

from __future__ import annotations

import os
from typing import Any

import keras

from ..fix.checkpoint import directory_of_pattern
from ..fix.space import SPACE_EVERY_S
from .watch import TrainingWatch

__all__ = ["TrainWatchCallback", "watched_dirs"]


def watched_dirs(items: tuple[Any, ...]) -> tuple[list[Any], list[Any], bool, bool]:
    """(log dirs, checkpoint dirs, saves at epoch end, saves every N batches)."""
    logs: list[Any] = []
    ckpts: list[Any] = []
    per_epoch = per_batch = False
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            ckpts.append(item)
            per_epoch = True
            continue
        pattern = getattr(item, "filepath", None) if hasattr(item, "save_best_only") else None
        where = directory_of_pattern(pattern) if pattern else getattr(item, "backup_dir", None)
        if where:
            ckpts.append(where)
            freq = getattr(item, "save_freq", "epoch")
            per_epoch, per_batch = per_epoch or freq == "epoch", per_batch or freq != "epoch"
        elif getattr(item, "log_dir", None):
            logs.append(item.log_dir)
        else:
            raise TypeError(
                f"TrainWatchCallback watches paths, ModelCheckpoint, BackupAndRestore or "
                f"TensorBoard, not {type(item).__name__}"
            )
    return logs, ckpts, per_epoch, per_batch


class TrainWatchCallback(keras.callbacks.Callback):
    """See ``integrations.watch.TrainingWatch`` for ``on_full``."""

    def __init__(
        self,
        *watch: Any,
        on_full: str = "raise",
        check: bool = True,
        space_every: float = SPACE_EVERY_S,
        wait_limit_s: float | None = None,
        recheck_s: float | None = None,
        notify: str | None = None,
        notify_format: str = "json",
    ) -> None:
        super().__init__()
        self._logs, self._ckpts, self._per_epoch, self._per_batch = watched_dirs(watch)
        self.watch = TrainingWatch(
            on_full=on_full,
            check=check,
            space_every=space_every,
            wait_limit_s=wait_limit_s,
            recheck_s=recheck_s,
            notify=notify,
            notify_format=notify_format,
        )

    def on_train_begin(self, logs: Any = None) -> None:
        self.watch.begin(self._logs, self._ckpts)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._per_batch:
            self.watch.before_checkpoint()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if self._per_epoch:
            self.watch.before_checkpoint()

    def on_train_end(self, logs: Any = None) -> None:
        self.watch.end()
