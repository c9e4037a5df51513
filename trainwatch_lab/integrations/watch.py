"""What every framework callback does, framework aside (the callbacks only find the paths)."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterable
from dataclasses import replace

from ..advice.check import run_check
from ..advice.notify import Notifier, check_target
from ..core.defaults import DEFAULTS
from ..core.model import Alert
from ..core.paths.names import normalise
from ..fix import room
from ..fix.report import report
from ..fix.space import SPACE_EVERY_S, CheckpointWontFit, SpaceWatch, fmt_size
from .notify import notify_to, stop_notifying

log = logging.getLogger(__name__)

ON_FULL = ("raise", "warn", "wait")
WONT_FIT_FIX = (
    "Free space or keep fewer checkpoints (save_top_k / save_total_limit / keep=N) before the "
    "next save, or save to a disk with more room. The Lightning callback can also make room "
    "from its own older saves (keep=N), save elsewhere (fallback=DIR) or wait for room "
    "(on_full='wait'); all are off by default."
)


def paths_of(items: Iterable[object]) -> list[str]:
    """The usable paths among ``items`` (None, empty strings and URLs left out)."""
    found = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            text = os.fspath(item)
            if isinstance(text, str) and text and "://" not in text:
                found.append(normalise(text))
    return list(dict.fromkeys(found))


class TrainingWatch:
    """Checks at train start and before each checkpoint; never blocks the caller.

    ``on_full="raise"`` stops a save that will not fit with ``CheckpointWontFit`` before it
    writes anything (the run ends with a clear error, the earlier saves intact);
    ``"warn"`` shows the warning once and lets the save go ahead; ``"wait"`` (issue 38)
    pauses the step before the save until there is room (fix.room: told inline and on the
    notification channels, measured again every ``recheck_s``, one ``CheckpointWontFit``
    after ``wait_limit_s``). ``notify=URL`` sends what the saves say to a webhook from
    ``begin`` to ``end`` (integrations.notify).
    """

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
        if on_full not in ON_FULL:
            raise ValueError(f"on_full must be one of {', '.join(ON_FULL)}, not {on_full!r}")
        waiting = "wait" if on_full == "wait" else "raise"
        self.full = replace(room.settings(None, waiting, wait_limit_s, recheck_s), fallback=None)
        if notify is not None:
            check_target(notify, notify_format)  # one line now, not at train start
        self.notify, self.notify_format = notify, notify_format
        self._notifier: Notifier | None = None
        if not isinstance(space_every, (int, float)) or not space_every > 0:
            raise ValueError(
                f"space_every must be a positive number of seconds, not {space_every!r}"
            )
        self.on_full, self.check, self.space_every = on_full, bool(check), float(space_every)
        self.space: SpaceWatch | None = None
        self.warnings: list[Alert] = []  # what the start check found
        self.checked = threading.Event()
        self._warned = False
        # the saves themselves decide (fix.save_checkpoint with keep=, fallback= or
        # on_full="wait": room made, another directory, a pause): no refusal before them
        self.deferred = False

    def begin(self, log_dirs: Iterable[object], checkpoint_dirs: Iterable[object]) -> None:
        """Start the check (its own daemon thread) and the space readings."""
        self.end()
        if self.notify is not None:
            self._notifier = notify_to(self.notify, self.notify_format)
        logs, ckpts = paths_of(log_dirs), paths_of(checkpoint_dirs)
        self.space = SpaceWatch(ckpts, every=self.space_every).start()
        paths = list(dict.fromkeys(logs + ckpts))
        if self.check and paths:
            threading.Thread(
                target=self._check, args=(paths,), name="trainwatch-train-check", daemon=True
            ).start()
        else:
            self.checked.set()

    def _check(self, paths: list[str]) -> None:
        try:
            found = run_check(paths, probe=True, timeout=DEFAULTS.mount_timeout_s).alerts
            self.warnings = [a for a in found if a.severity != "info"]
            report(self.warnings)
        except Exception:  # a check must never end a training run
            log.debug("trainwatch: the train-start check failed", exc_info=True)
        finally:
            self.checked.set()

    @property
    def alerts(self) -> list[Alert]:
        """Deprecated: ``warnings`` (the word is warning everywhere); kept for one release."""
        warnings.warn(
            "TrainingWatch.alerts is deprecated: use TrainingWatch.warnings",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.warnings

    def before_checkpoint(self, name: str = "the next checkpoint") -> None:
        """Raise ``CheckpointWontFit`` (on_full="raise") or warn once when the newest save is
        larger than the free space, from the latest readings (no waiting)."""
        if self.deferred:
            return
        if self.on_full == "wait":
            self._wait_for_room(name)
            return
        refusal: CheckpointWontFit | None = self.space.check(name) if self.space else None
        if refusal is None:
            return
        if self.on_full == "raise":
            raise refusal
        if not self._warned:
            self._warned = True
            message = (
                f"The next checkpoint will not fit in {refusal.directory}: the newest save took "
                f"{fmt_size(refusal.needed)}, {fmt_size(refusal.available)} is free."
            )
            warning = Alert(
                "checkpoint-wont-fit", "critical", refusal.directory, message, WONT_FIT_FIX
            )
            report([warning])

    def _wait_for_room(self, name: str) -> None:
        """Measure now (the last save may be newer than the readings) and, while the next
        save will not fit, pause here: the framework's own save runs only once it fits."""
        space = self.space
        refusal = space.check_now(name) if space is not None else None
        if refusal is None or space is None:
            return
        pause = room.Pause(self.full, refusal, name)
        while refusal is not None:
            pause.wait(refusal)
            refusal = space.check_now(name)
        pause.resumed(None)

    def saved(self) -> None:
        """A save just finished: measure again soon (the newest save changed)."""
        if self.space is not None:
            self.space.refresh()

    def end(self) -> None:
        if self.space is not None:
            self.space.close()
            self.space = None
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            stop_notifying(notifier)
