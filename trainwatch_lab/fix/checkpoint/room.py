"""A save that would not fit: go elsewhere, or wait for room, and say so (issue 38).

``save_checkpoint`` first makes room by the user's retention (``keep=N``: its own older saves,
never the newest; save._room). When that is not enough, in order:

- ``fallback=DIR`` (or ``$TRAINWATCH_SAVE_FALLBACK``): the save goes there when it fits
  there, and a warning says where it went;
- ``on_full="wait"``: the save pauses (the training loop with it: the step does not run on
  into a crash), a warning goes inline and to the notification channels with the deadline
  and what would free room, the space is checked again every ``recheck_s`` and the save
  resumes on its own when it fits; after ``wait_limit_s`` one ``CheckpointWontFit`` says how
  long it waited (nothing was written, the earlier saves are whole);
- else ``CheckpointWontFit`` at once, as before (the default: nothing changes unless asked).

Each of these is a recorded event (fix.checkpoint.events). ``CLOCK`` and ``SLEEP`` are read at
call time, so tests replace them (no wall-clock races).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...core.compat import add_note
from ...core.defaults import DEFAULTS
from ...core.guard.guard import MountGuard
from ...core.model import Alert
from ...core.paths.names import normalise, printable
from ..space import CheckpointWontFit, fmt_size
from . import events

log = logging.getLogger(__name__)

ON_FULL = ("raise", "wait")
FALLBACK_ENV = "TRAINWATCH_SAVE_FALLBACK"  # a setting for code one cannot edit (a framework)
CLOCK: Callable[[], float] = time.monotonic
SLEEP: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class OnFull:
    """What a save that will not fit does, checked once when the save is asked for."""

    fallback: str | None = None
    wait: bool = False
    limit_s: float = DEFAULTS.save_full_wait_s
    recheck_s: float = DEFAULTS.save_full_recheck_s

    @property
    def acts(self) -> bool:
        """Whether a full disk is ours to handle (else it is raised as it comes)."""
        return self.wait or self.fallback is not None


def _seconds(name: str, value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)


def settings(fallback: object, on_full: object, wait_limit_s: object, recheck_s: object) -> OnFull:
    """``OnFull`` from save_checkpoint's arguments; ValueError/TypeError (one line) for bad
    input, raised before anything is touched."""
    if on_full not in ON_FULL:
        raise ValueError(f"on_full must be one of {', '.join(ON_FULL)}, not {on_full!r}")
    if fallback is None:
        fallback = os.environ.get(FALLBACK_ENV) or None
    if fallback is not None:
        if not isinstance(fallback, (str, os.PathLike)):
            raise TypeError(f"fallback must be a directory path, not {type(fallback).__name__}")
        text = os.fspath(fallback)
        if not isinstance(text, str) or not text or "\x00" in text:
            raise ValueError(f"fallback must name a directory, not {text!r}")
        fallback = normalise(text)
    return OnFull(
        fallback=fallback,
        wait=on_full == "wait",
        limit_s=_seconds("wait_limit_s", wait_limit_s, DEFAULTS.save_full_wait_s),
        recheck_s=_seconds("recheck_s", recheck_s, DEFAULTS.save_full_recheck_s),
    )


def _minutes(seconds: float) -> str:
    """``1 h 05 min``, ``2 min 00 s``, ``15 s``."""
    s = int(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def filled(exc: OSError, directory: str, name: str, needed: int) -> CheckpointWontFit | None:
    """A disk (or quota) that filled while the save was written, as a refusal: the save grew
    past the last one, or another writer took the room after the check. The atomic save
    left nothing half-written (its note says what was checked); None for another error."""
    if exc.errno not in FULL_ERRNOS:
        return None
    message = (
        f"checkpoint {printable(name)} filled {printable(directory)} while it was written "
        f"({exc.strerror or exc}). Nothing was left half-written; the earlier saves are intact."
    )
    refusal = CheckpointWontFit(message, directory, needed, 0)
    refusal.midway = True
    for note in getattr(exc, "__notes__", ()):
        add_note(refusal, note)
    return refusal


def freeing(refusal: CheckpointWontFit) -> str:
    """What would free room: how much, where, and the older saves there that would."""
    short = fmt_size(max(0, refusal.needed - refusal.available))
    older = refusal.older
    named = ", ".join(f"{printable(n)} ({fmt_size(b)})" for n, b in older[:3])
    text = f"free {short} in {printable(refusal.directory)}"
    if named:
        text += f", e.g. by removing an older save ({named})"
    return text + "; or pass keep=N or fallback=DIR to save_checkpoint"


def make(
    guard: MountGuard,
    key: str,
    directory: str,
    doomed: list[str],
    name: str,
    needed: int,
    available: int,
    limit: str = "",
) -> None:
    """Remove the older saves ``doomed`` (names in ``directory``) to make room for ``name``,
    through the guard; logged and recorded (``save-room-made``). The caller chose them: only
    its own saves, never the newest."""
    text = (
        f"removed {len(doomed)} older save(s) ({', '.join(printable(n) for n in doomed)}) "
        f"first to make room for {printable(name)} ({fmt_size(needed)} needed, "
        f"{fmt_size(available)} free{limit})"
    )
    log.warning("trainwatch: %s", text)
    guard.call(
        key,
        "remove",
        what="remove older saves",
        paths=[os.path.join(directory, n) for n in doomed],
    )
    events.record(
        events.ROOM_MADE, directory, text, removed=doomed, needed=needed, available=available
    )


def redirected(refusal: CheckpointWontFit, landed: str) -> None:
    """The save went to the fallback directory: said inline, notified, recorded."""
    text = (
        f"checkpoint saved to {printable(landed)} instead of {printable(refusal.directory)}: "
        f"{fmt_size(refusal.needed)} needed there, {fmt_size(refusal.available)} free"
    )
    # inline under the running cell, else one log line (fix.report), and the channels
    events.tell(Alert("checkpoint-wont-fit", "warning", refusal.directory, text, freeing(refusal)))
    events.record(
        events.REDIRECTED,
        refusal.directory,
        text,
        saved=landed,
        needed=refusal.needed,
        available=refusal.available,
    )


class Pause:
    """One save waiting for room: told once when it starts, checked every ``recheck_s``,
    told again when it resumes or gives up."""

    def __init__(self, full: OnFull, refusal: CheckpointWontFit, name: str) -> None:
        self.full, self.name, self.first = full, name, refusal
        self.started = CLOCK()
        self.deadline = self.started + full.limit_s
        self._said = self.started
        where = printable(refusal.directory)
        if refusal.midway:
            why = f"{where} filled while it was written"
        else:
            why = (
                f"it needs about {fmt_size(refusal.needed)} in {where}, "
                f"{fmt_size(refusal.available)} is free"
            )
        message = (
            f"checkpoint {printable(name)} is paused: {why}. The save checks again every "
            f"{full.recheck_s:g} s and goes on by itself when there is room; it gives up in "
            f"{_minutes(full.limit_s)}."
        )
        fix = freeing(refusal)
        fix = fix[0].upper() + fix[1:] + "."
        self.alert = Alert("checkpoint-wont-fit", "critical", refusal.directory, message, fix)
        events.tell(self.alert)  # inline, else one log line (fix.report), and the channels
        events.record(
            events.PAUSED,
            refusal.directory,
            f"paused {printable(name)} waiting for space on {where}",
            name=name,
            needed=refusal.needed,
            available=refusal.available,
            limit_s=full.limit_s,
        )

    def wait(self, refusal: CheckpointWontFit) -> None:
        """Sleep until the next check, or raise the one error once the limit is reached."""
        now = CLOCK()
        left = self.deadline - now
        if left <= 0:
            self.give_up(refusal, now)
        if now - self._said >= 60.0:  # the countdown, once a minute
            self._said = now
            log.warning(
                "trainwatch: checkpoint %s still paused for space on %s: %s free of %s "
                "needed, %s left",
                printable(self.name),
                printable(refusal.directory),
                fmt_size(refusal.available),
                fmt_size(refusal.needed),
                _minutes(left),
            )
        SLEEP(min(self.full.recheck_s, left))

    def give_up(self, refusal: CheckpointWontFit, now: float) -> None:
        waited = _minutes(now - self.started)
        where = printable(refusal.directory)
        message = (
            f"checkpoint {printable(self.name)} was not saved: waited {waited} for space in "
            f"{where} ({fmt_size(refusal.needed)} needed, {fmt_size(refusal.available)} free). "
            "Nothing was written; the earlier saves are intact."
        )
        waited_s = now - self.started
        events.record(events.GAVE_UP, refusal.directory, message, name=self.name, waited_s=waited_s)
        events.tell(self.alert, "cleared")
        error = CheckpointWontFit(message, refusal.directory, refusal.needed, refusal.available)
        raise error from refusal

    def resumed(self, landed: str | None) -> None:
        """Space came back: ``landed`` is where the save went (None: a framework's hook that
        paused before the framework's own save)."""
        waited = CLOCK() - self.started
        where = printable(self.first.directory)
        text = f"resumed after {_minutes(waited)} waiting for space on {where}"
        if landed is not None:
            text += f"; saved {printable(landed)}"
        log.warning("trainwatch: checkpoint %s", text)
        events.record(
            events.RESUMED,
            self.first.directory,
            text,
            name=self.name,
            saved=landed,
            waited_s=waited,
        )
        events.tell(self.alert, "cleared")
