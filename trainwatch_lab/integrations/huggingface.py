"""Hugging Face: ``Trainer(..., callbacks=[TrainWatchCallback()])`` or
``trainer.add_callback(TrainWatchCallback())``.

At train start ``output_dir`` (where the Trainer writes ``checkpoint-<step>/`` and, in
``runs/``, the TensorBoard logs) is checked. The Trainer decides to save in ``on_step_end``
and ``on_epoch_end`` (``control.should_save``) and saves right after them, so that is where a
save that will not fit is stopped; ``on_save`` measures again. The Trainer writes its
checkpoints itself, so of issue 38's choices only ``on_full="wait"`` applies here: the step
pauses before the save until there is room (``wait_limit_s``, ``recheck_s``, ``notify=URL``).
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ..fix.space import SPACE_EVERY_S
from .watch import TrainingWatch

__all__ = ["TrainWatchCallback"]


class TrainWatchCallback(TrainerCallback):
    """See ``integrations.watch.TrainingWatch`` for ``on_full``."""

    def __init__(
        self,
        *,
        on_full: str = "raise",
        check: bool = True,
        space_every: float = SPACE_EVERY_S,
        wait_limit_s: float | None = None,
        recheck_s: float | None = None,
        notify: str | None = None,
        notify_format: str = "json",
    ) -> None:
        self.watch = TrainingWatch(
            on_full=on_full,
            check=check,
            space_every=space_every,
            wait_limit_s=wait_limit_s,
            recheck_s=recheck_s,
            notify=notify,
            notify_format=notify_format,
        )

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(state, "is_world_process_zero", True):
            logs = [getattr(args, "logging_dir", None)]  # gone in transformers 5
            self.watch.begin([*logs, args.output_dir], [args.output_dir])

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
