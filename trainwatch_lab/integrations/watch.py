"""What every framework callback does, framework aside (the callbacks only find the paths)."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # typing.Unpack is 3.11+; only the type checkers read it
    from typing_extensions import Unpack

from ..advice.check import run_check
from ..advice.notify import Notifier, check_target
from ..core.defaults import DEFAULTS
from ..core.model import Alert
from ..core.paths.names import normalise
from ..fix.checkpoint import room
from ..fix.checkpoint.retention import Series, fits_in, make_room
from ..fix.checkpoint.save import check_keep
from ..fix.report import report
from ..fix.space import SPACE_EVERY_S, CheckpointWontFit, SpaceWatch, fmt_size
from .notify import notify_to, stop_notifying

log = logging.getLogger(__name__)

ON_FULL = ("raise", "warn", "wait")
WONT_FIT_FIX = (
    "Free space or keep fewer checkpoints (save_top_k / save_total_limit / keep=N) before the "
    "next save, or save to a disk with more room. The callbacks can also make room from the "
    "framework's own older saves (keep=N), save elsewhere (fallback=DIR: Lightning, Keras) or "
    "wait for room (on_full='wait'); all are off by default."
)


class WatchOptions(TypedDict, total=False):
    """What every framework callback takes (``TrainingWatch``'s keywords; all optional)."""

    on_full: str  # "raise" (the default), "warn" or "wait"
    check: bool  # check the directories at train start (default True)
    space_every: float  # seconds between space readings (SPACE_EVERY_S)
    keep: int | None  # make room from the framework's own older saves (off: None)
    wait_limit_s: float | None  # on_full="wait": give up after (DEFAULTS.save_full_wait_s)
    recheck_s: float | None  # on_full="wait": measure again every (save_full_recheck_s)
    notify: str | None  # a webhook URL for what the saves say (off: None)
    notify_format: str  # its body: "json" (the default), "slack", ...


class SaveOptions(WatchOptions, total=False):
    """The options of a callback that can choose where each save goes (Lightning, Keras)."""

    fallback: str | os.PathLike[str] | None  # save there when it will not fit (off: None)


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
    pauses the step before the save until there is room (fix.checkpoint.room: told inline and on the
    notification channels, measured again every ``recheck_s``, one ``CheckpointWontFit``
    after ``wait_limit_s``). ``notify=URL`` sends what the saves say to a webhook from
    ``begin`` to ``end`` (integrations.notify).

    Before any of these, the two that change where or what is saved, when the callback
    hands over what they need: ``keep=N`` removes the framework's own older saves of that
    directory (``series``: fix.checkpoint.retention) when that makes the room, then ``fallback=DIR``
    points the framework's save there (``redirects``) when it fits there. Options are
    checked here, one line each, before training starts.
    """

    def __init__(self, **options: Unpack[SaveOptions]) -> None:
        unknown = sorted(set(options) - SaveOptions.__optional_keys__)
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
        on_full = options.get("on_full", "raise")
        if on_full not in ON_FULL:
            raise ValueError(f"on_full must be one of {', '.join(ON_FULL)}, not {on_full!r}")
        waiting = "wait" if on_full == "wait" else "raise"
        keep, fallback = options.get("keep"), options.get("fallback")
        check_keep(keep)  # bad values: one line now, not at the first save
        limit_s, recheck_s = options.get("wait_limit_s"), options.get("recheck_s")
        self.full = room.settings(fallback, waiting, limit_s, recheck_s)
        self.keep = keep
        # what fix.save_checkpoint is handed where the saves go through it (Lightning)
        save_options: dict[str, Any] = {
            "keep": keep,
            "fallback": fallback,
            "on_full": "wait" if self.full.wait else None,
            "wait_limit_s": limit_s,
            "recheck_s": recheck_s,
        }
        self.save_options = {k: v for k, v in save_options.items() if v is not None}
        notify, notify_format = options.get("notify"), options.get("notify_format", "json")
        if notify is not None:
            check_target(notify, notify_format)  # one line now, not at train start
        self.notify, self.notify_format = notify, notify_format
        self._notifier: Notifier | None = None
        space_every = options.get("space_every", SPACE_EVERY_S)
        if not isinstance(space_every, (int, float)) or not space_every > 0:
            raise ValueError(
                f"space_every must be a positive number of seconds, not {space_every!r}"
            )
        self.on_full, self.space_every = on_full, float(space_every)
        self.check = bool(options.get("check", True))
        self.space: SpaceWatch | None = None
        self.series: dict[str, Series] = {}  # the framework's own saves, for keep=N
        # directory -> points the framework's next save to a directory (None: back home) and
        # returns the path it will save to, for fallback=
        self.redirects: dict[str, Callable[[str | None], str]] = {}
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
        """Before the framework's own save: when it will not fit, make room (``keep``), else
        point it to the fallback, else wait for room (``on_full="wait"``), raise
        ``CheckpointWontFit`` ("raise") or warn once ("warn"). With none of keep, fallback
        or the wait it answers from the latest readings (no waiting); with one of them it
        measures now, through the mount guard (bounded by its timeouts)."""
        space = self.space
        if self.deferred or space is None:
            return
        for point in self.redirects.values():
            point(None)  # every save tries its own directory first
        redirects = self.full.fallback is not None and bool(self.redirects)
        acts = self.full.wait or bool(self.keep and self.series) or redirects
        # about to act on a full disk: measure now (the last save may be newer than the
        # readings); else answer from the readings
        refusal = space.check_now(name) if acts else space.check(name)
        if refusal is not None and self._make_room(refusal, name):
            refusal = space.check_now(name)
        if refusal is None or self._redirect(refusal):
            return
        if self.full.wait:
            self._wait_for_room(space, refusal, name)
        elif self.on_full == "raise":
            raise refusal
        elif not self._warned:
            self._warned = True
            message = (
                f"The next checkpoint will not fit in {refusal.directory}: the newest save took "
                f"{fmt_size(refusal.needed)}, {fmt_size(refusal.available)} is free."
            )
            warning = Alert(
                "checkpoint-wont-fit", "critical", refusal.directory, message, WONT_FIT_FIX
            )
            report([warning])

    def _make_room(self, refusal: CheckpointWontFit, name: str) -> bool:
        """``keep=N``: the framework's own older saves where the save will not fit
        (fix.checkpoint.retention); True when that made room."""
        series = self.series.get(refusal.directory)
        if self.keep is None or series is None:
            return False
        return make_room(series, self.keep, name, refusal.needed)

    def _redirect(self, refusal: CheckpointWontFit) -> bool:
        """``fallback=DIR``: point the framework's save there when it fits there (said and
        recorded: fix.checkpoint.room.redirected); True if so."""
        fallback, point = self.full.fallback, self.redirects.get(refusal.directory)
        if fallback is None or point is None or fallback == refusal.directory:
            return False
        if not fits_in(fallback, refusal.needed):
            refusal.add_note(f"trainwatch: the fallback {fallback} has no room for it either")
            return False
        room.redirected(refusal, point(fallback))
        return True

    def _wait_for_room(self, space: SpaceWatch, refusal: CheckpointWontFit, name: str) -> None:
        """Pause here while the next save will not fit: the framework's own save runs only
        once it fits (fix.checkpoint.room: told, re-checked, one error after the limit)."""
        pause = room.Pause(self.full, refusal, name)
        current: CheckpointWontFit | None = refusal
        while current is not None:
            pause.wait(current)
            current = space.check_now(name)
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
