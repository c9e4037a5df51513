"""``keep=N`` (and the room a ``fallback`` has) for the saves a framework writes itself (the
Hugging Face and Keras callbacks, issue 38). ``save_checkpoint`` knows its own saves by its
manifest; a framework's saves are known by their names instead (a ``Series``: the Trainer's
``checkpoint-<step>`` directories, the files of a Keras ``ModelCheckpoint`` pattern written
during this run). Before a save that will not fit, the series' oldest saves beyond ``keep``
go first, when that makes the room: never the newest whole one, never one the series
spares, never a name outside the series. Everything that touches the directory goes
through the mount guard."""

from __future__ import annotations

import os
import re
import string
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ...core.guard.guard import MountGuard, default_guard
from ...core.paths.look import quota_device
from ...core.storage.mounts import mount_for_path, read_mounts
from . import room
from . import save as checkpoint
from .save import SAVE_KEY, available_bytes

Save = list[Any]  # [name, bytes, mtime], as the guard's "saves" listing gives it


def _nothing() -> Collection[str]:
    return ()


@dataclass(frozen=True)
class Series:
    """A framework's own saves in ``directory``: the names matching ``pattern`` (a regular
    expression, whole name), written at or after ``since`` (time.time(); None: any time),
    oldest first by ``order``; ``spare()`` names saves never to remove (the best one)."""

    directory: str
    pattern: str
    order: Callable[[Save], Any]
    since: float | None = None
    spare: Callable[[], Collection[str]] = field(default=_nothing)


def _plan(
    directory: str, pattern: str, guard: MountGuard | None, name: str
) -> tuple[MountGuard, str, dict[str, Any], int, str]:
    """The guard, its key, the listing ``save_checkpoint`` plans with (checkpoint._plan) and
    the bytes ours there (free space or what the quota leaves, and how a message names it)."""
    g = guard if guard is not None else default_guard()
    entry = mount_for_path(directory, read_mounts())
    key = SAVE_KEY.format(entry.mountpoint)
    dst = os.path.join(directory, name)
    plan = checkpoint._plan(g, key, directory, name, dst, pattern, quota_device(entry))
    available, limit = available_bytes(plan, entry.mountpoint)
    return g, key, plan, available, limit


def fits_in(directory: str, needed: int, guard: MountGuard | None = None) -> bool:
    """Whether ``needed`` bytes fit where ``directory`` is (or will be created): a fallback
    for a save the framework writes itself, asked before pointing the save there."""
    return needed <= _plan(directory, r"(?!)", guard, "the next checkpoint")[3]


def make_room(
    series: Series, keep: int, name: str, needed: int, guard: MountGuard | None = None
) -> bool:
    """Remove the series' saves that ``keep`` would not keep once ``name`` lands (oldest
    first, never the newest or a spared one) when that leaves ``needed`` bytes free; True
    when there is room now. Removes nothing when it would not be enough."""
    g, key, plan, available, limit = _plan(series.directory, series.pattern, guard, name)
    if needed <= available:
        return True
    saves = sorted(plan["saves"], key=series.order)  # oldest first
    spare = set(series.spare())
    removable = [
        s
        for s in saves[:-1]  # the newest stays until the new one lands
        if s[0] not in spare and (series.since is None or s[2] >= series.since)
    ]
    doomed = removable[: max(0, len(saves) - (keep - 1))]
    if not doomed or available + sum(s[1] for s in doomed) < needed:
        return False
    names = [s[0] for s in doomed]
    room.make(g, key, series.directory, names, name, needed, available, limit)
    return True


def step_of(save: Save) -> int:
    """``checkpoint-1200`` -> 1200 (the Trainer's own order of its checkpoints)."""
    return int(save[0].rsplit("-", 1)[1])


SEQUENCE_FIELDS = ("epoch", "batch")  # Keras numbers its saves so, in this order


def name_pattern(filepath: str | os.PathLike[str]) -> str:
    """The names a save path pattern makes (``model_{epoch:02d}.keras`` ->
    ``model_(?P<epoch>\\d+)\\.keras``): ``{epoch}`` and ``{batch}`` digits (named, for
    ``pattern_order``), any other ``{field}`` any text, the rest as it is."""
    parts = string.Formatter().parse(os.path.basename(os.fspath(filepath)))
    out, named = [], set()
    for text, fld, _, _ in parts:
        out.append(re.escape(text))
        if fld is None:
            continue
        if fld in SEQUENCE_FIELDS and fld not in named:
            named.add(fld)
            out.append(f"(?P<{fld}>\\d+)")
        else:
            out.append(".+")
    return "".join(out)


def pattern_order(pattern: str) -> Callable[[Save], tuple[Any, ...]]:
    """Saves of one fit by their own numbers (``{epoch}``, then ``{batch}``: a fit counts
    up), then by when written: a clock stepped back during the fit must not make the newest
    save look oldest (issue 34 item 9). Without those fields, by when written."""
    compiled = re.compile(pattern)

    def order(save: Save) -> tuple[Any, ...]:
        m = compiled.fullmatch(save[0])
        found = m.groupdict() if m else {}
        numbers = tuple(int(found.get(f) or -1) for f in SEQUENCE_FIELDS)
        return (*numbers, save[2], save[0])

    return order
