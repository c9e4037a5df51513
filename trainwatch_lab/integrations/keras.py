"""Keras 3: ``model.fit(..., callbacks=[TrainWatchCallback(ckpt), ckpt])``.

A Keras callback never sees the other callbacks of ``fit``, so it is handed what to watch:
``ModelCheckpoint`` (the directory of its ``filepath`` pattern), ``BackupAndRestore``
(``backup_dir``), ``TensorBoard`` (``log_dir``) or plain paths (checked, and watched for
space like a checkpoint directory). Keras calls callbacks in list order, so put this one
before the checkpoint callbacks: its ``on_epoch_end``/``on_train_batch_end`` then runs
before their save.

A save that will not fit (issue 38; all off by default): ``keep=N`` removes a
``ModelCheckpoint``'s own older files first (the names its pattern makes, written during
this fit, oldest first, never the newest, never a file that was there before the fit),
when that makes the room; ``on_full="wait"`` pauses the fit before the save until there is
room (``wait_limit_s``, ``recheck_s``, ``notify=URL``); ``fallback=DIR`` (or
``$TRAINWATCH_SAVE_FALLBACK``) points that save of the ``ModelCheckpoint`` to ``DIR`` (Keras
reads its ``filepath`` at each save) when it fits there, says where, and tries the home
directory again at the next save. In that order: room first, then the fallback, then the
wait.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import keras

from ..core.paths.names import normalise
from ..fix.checkpoint.retention import Series, name_pattern, pattern_order
from ..fix.checkpoint.save import directory_of_pattern
from .watch import SaveOptions, TrainingWatch

if TYPE_CHECKING:  # typing.Unpack is 3.11+; only the type checkers read it
    from typing_extensions import Unpack

__all__ = ["TrainWatchCallback", "keras_series", "watched_dirs"]


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


def keras_series(items: tuple[Any, ...], since: float) -> dict[str, Series]:
    """Each ``ModelCheckpoint``'s own saves: the names its pattern makes in its directory,
    written since ``since`` (this run; a file there before is not ours), in the order the
    fit numbers them (retention.pattern_order)."""
    found = {}
    for item in items:
        pattern = getattr(item, "filepath", None) if hasattr(item, "save_best_only") else None
        if pattern:
            where = normalise(directory_of_pattern(pattern))
            names = name_pattern(pattern)
            found[where] = Series(where, names, pattern_order(names), since=since)
    return found


Pointed = dict[int, tuple[str, str]]  # id(ModelCheckpoint) -> (its own filepath, ours)


def keras_redirects(
    items: tuple[Any, ...], pointed: Pointed
) -> dict[str, Callable[[str | None], str]]:
    """For ``fallback=``: each ``ModelCheckpoint``'s directory -> a function pointing its
    ``filepath`` (read by Keras at each save) to another directory, or back (None).

    ``pointed`` remembers what we set: Keras calls no callback when ``fit`` ends in an
    exception, so a save pointed at the fallback stays pointed there; the next ``fit``
    finds our value and takes the checkpoint's own back (a value the user set since stays)."""
    found = {}
    for item in items:
        pattern = getattr(item, "filepath", None) if hasattr(item, "save_best_only") else None
        if not pattern:
            continue
        own, ours = pointed.pop(id(item), (pattern, pattern))
        if pattern == ours:
            item.filepath = pattern = own
        home = normalise(directory_of_pattern(pattern))
        found[home] = _pointer(item, pattern, home, pointed)
    return found


def _pointer(item: Any, pattern: str, home: str, pointed: Pointed) -> Callable[[str | None], str]:
    rest = os.path.relpath(normalise(pattern), home)  # the part with the {fields}

    def point(where: str | None) -> str:
        item.filepath = pattern if where is None else os.path.join(where, rest)
        if where is None:
            pointed.pop(id(item), None)
        else:
            pointed[id(item)] = (pattern, str(item.filepath))
        return str(item.filepath)

    return point


class TrainWatchCallback(keras.callbacks.Callback):
    """See ``integrations.watch.TrainingWatch`` for ``on_full`` and the module's doc for
    ``keep`` and ``fallback``."""

    def __init__(self, *watch: Any, **options: Unpack[SaveOptions]) -> None:
        super().__init__()
        self._items = watch
        self._logs, self._ckpts, self._per_epoch, self._per_batch = watched_dirs(watch)
        self.watch = TrainingWatch(**options)
        self._pointed: Pointed = {}  # the saves we pointed elsewhere (keras_redirects)

    def on_train_begin(self, logs: Any = None) -> None:
        self.watch.begin(self._logs, self._ckpts)
        self.watch.series = keras_series(self._items, time.time())
        self.watch.redirects = keras_redirects(self._items, self._pointed)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._per_batch:
            self.watch.before_checkpoint()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if self._per_epoch:
            self.watch.before_checkpoint()

    def on_train_end(self, logs: Any = None) -> None:
        for point in self.watch.redirects.values():
            point(None)  # the callback as it was handed to us
        self.watch.end()
