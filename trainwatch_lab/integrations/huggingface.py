"""Hugging Face: ``Trainer(..., callbacks=[TrainWatchCallback()])`` or
``trainer.add_callback(TrainWatchCallback())``.

At train start ``output_dir`` (where the Trainer writes ``checkpoint-<step>/`` and, in
``runs/``, the TensorBoard logs) is checked. The Trainer decides to save in ``on_step_end``
and ``on_epoch_end`` (``control.should_save``) and saves right after them, so that is where a
save that will not fit is stopped; ``on_save`` measures again. The Trainer writes its
checkpoints itself: of issue 38's choices (all off by default) these apply here:

- ``keep=N``: before a save that will not fit, the Trainer's own oldest ``checkpoint-<step>``
  directories beyond N go first (never the newest, never its best checkpoint, never another
  name), when that makes the room. ``save_total_limit=N`` removes the same ones, but only
  after the save, which a full disk never reaches; with both, ours acts only when the disk
  is full, the Trainer's after every save.
- ``on_full="wait"``: the step pauses before the save until there is room (``wait_limit_s``,
  ``recheck_s``, ``notify=URL``).
- No ``fallback``: the Trainer writes ``output_dir/checkpoint-<step>`` itself, its path made
  inside ``Trainer._save_checkpoint`` from ``args.output_dir``, which also holds the final
  model, the logs and what ``resume_from_checkpoint=True`` looks for; moving that mid-run
  would scatter the run. Save ``output_dir`` on a disk with room, or use keep/wait.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR as PREFIX_CHECKPOINT

from ..core.paths.names import normalise
from ..fix.checkpoint.retention import Series, step_of
from .watch import TrainingWatch, WatchOptions

if TYPE_CHECKING:  # typing.Unpack is 3.11+; only the type checkers read it
    from typing_extensions import Unpack

__all__ = ["TrainWatchCallback"]


def trainer_series(args: Any, state: Any) -> Series:
    """The Trainer's own checkpoints: ``output_dir/checkpoint-<step>`` (the names its
    ``save_total_limit`` rotates), by step; its best checkpoint is spared, as it spares it."""

    def best() -> list[str]:
        path = getattr(state, "best_model_checkpoint", None)
        return [os.path.basename(os.path.normpath(path))] if path else []

    return Series(normalise(args.output_dir), PREFIX_CHECKPOINT + r"-\d+", step_of, spare=best)


class TrainWatchCallback(TrainerCallback):
    """See ``integrations.watch.TrainingWatch`` for ``on_full`` and the module's doc for
    ``keep`` (``WatchOptions``: no ``fallback``)."""

    def __init__(self, **options: Unpack[WatchOptions]) -> None:
        if "fallback" in options:
            raise TypeError(
                "the Trainer writes output_dir/checkpoint-N itself: no fallback= here "
                "(keep=N or on_full='wait' instead)"
            )
        self.watch = TrainingWatch(**options)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(state, "is_world_process_zero", True):
            logs = [getattr(args, "logging_dir", None)]  # gone in transformers 5
            self.watch.begin([*logs, args.output_dir], [args.output_dir])
            self.watch.series = {normalise(args.output_dir): trainer_series(args, state)}

    def _before_save(self, control: Any) -> None:
        if getattr(control, "should_save", False):
            self.watch.before_checkpoint()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._before_save(control)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._before_save(control)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.watch.saved()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.watch.end()
