"""``save_checkpoint``: a save that fits, lands whole, and keeps the newest N.

What a run loses when the disk fills mid-save is usually not the new checkpoint but the last
good one (overwritten in place, or truncated beside it). So: check the free space against the
last save's size first (a clear error before anything is written), let the caller's ``save``
write to a hidden temporary name in the same directory, fsync and rename it over the real
name (atomic), and only then remove saves beyond ``keep``: only saves this saver wrote, of
the same series (checkpoint.manifest). The temporary name lies in a private directory made
for the save (mode 0700, created exclusively), so nothing planted there can redirect the
write. Whatever goes wrong on the way (a full disk, an exception in ``save``, Ctrl-C, the
helper killed mid-commit) the temporary name is removed, an earlier save moved aside is put
back, and the note on the error says what was checked afterwards.

``save`` is the caller's code and runs in our process; everything else that touches the
directory (free space, the listing, fsync, rename, removals) goes through the mount guard.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
from collections.abc import Callable
from typing import Any, Literal, overload

from ...core.compat import add_note
from ...core.guard.guard import MountGuard, MountUnresponsive, default_guard
from ...core.paths.look import quota_device
from ...core.paths.names import normalise, printable
from ...core.storage.mounts import mount_for_path, read_mounts
from ...core.storage.quota import binding
from ...core.storage.space import space_fields
from ..space import CheckpointWontFit, wont_fit
from . import manifest, room
from .background import SaveHandle, claim, run_claimed, skipped, start_claimed
from .partial import (
    PARTIAL,
    discard,
    remove,
    stale,
    write_and_commit,
)

log = logging.getLogger(__name__)

SAVE_KEY = "{} (save)"  # its own guard key: a long fsync never marks the mount stuck
# the listing weighs each earlier save (a directory of files on a slow share takes a while);
# a share that does not answer in this long would not take the save either
PLAN_TIMEOUT_S = 10.0


class SaveUnresponsive(OSError, MountUnresponsive):
    """The share did not answer during a save. An OSError (ETIMEDOUT), so that ``except
    OSError`` around a save catches it like any other failed write, and still a
    ``MountUnresponsive``. (core.guard.guard's own ``MountUnresponsive`` stays no OSError: its
    callers tell "this path is bad" (OSError) from "this mount hangs" by that difference.)"""

    def __init__(self, exc: MountUnresponsive) -> None:
        OSError.__init__(self, errno.ETIMEDOUT, str(exc))
        self.key, self.op, self.timeout_s, self.since = exc.key, exc.op, exc.timeout_s, exc.since
        for note in getattr(exc, "__notes__", ()):
            add_note(self, note)


def directory_of_pattern(pattern: str | os.PathLike[str]) -> str:
    """The directory a save path lands in, also for a pattern with ``{fields}`` (Keras
    ``ModelCheckpoint("ckpt/model_{epoch:02d}.keras")`` -> ``.../ckpt``): the leading path
    components that hold no field."""
    parts = normalise(os.fspath(pattern)).split(os.sep)
    fixed = []
    for part in parts[:-1]:
        if "{" in part:
            break
        fixed.append(part)
    return os.sep.join(fixed) or os.sep


def series_pattern(name: str) -> str:
    """The names of the same series of saves as ``name``: its digits may change
    (``epoch-003.pt`` -> ``epoch-\\d+\\.pt``); a name without digits is a series of one."""
    return "".join(r"\d+" if p.isdigit() else re.escape(p) for p in re.split(r"(\d+)", name))


def check_keep(keep: Any) -> None:
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ValueError(
            f"keep must be a whole number of saves, at least 1 (or None), not {keep!r}"
        )


def _validate(save: Any, path: Any, keep: Any) -> tuple[str, str]:
    if not callable(save):
        raise TypeError(
            f"save must be a callable that writes to the path it is given, not {save!r}"
        )
    check_keep(keep)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text or text.endswith(os.sep) or "\x00" in text:
        raise ValueError(f"path must name a file or directory to save to, not {text!r}")
    return os.path.split(normalise(text))


def available_bytes(plan: dict[str, Any], mountpoint: str) -> tuple[int, str]:
    """The bytes really ours where the save goes: the filesystem's free space for us, or
    what our quota leaves when that is less; and how a message names the limit."""
    available = space_fields(os.statvfs_result(tuple(plan["statvfs"])))["avail_bytes"]
    quota = binding(plan.get("quota") or {}, mountpoint)
    left = quota.left_bytes if quota is not None else None
    if left is not None and left < available:
        return left, f" under {quota.name()}"  # type: ignore[union-attr]
    return available, ""


def _room(
    guard: MountGuard,
    key: str,
    plan: dict[str, Any],
    name: str,
    directory: str,
    keep: int | None,
    mine: set[str],
    entries: dict[str, dict[str, Any]],
    mountpoint: str = "/",
    expected: int | None = None,
) -> list[list[Any]]:
    """Raise CheckpointWontFit unless the save fits; makes room first from saves that ``keep``
    would remove right after it anyway (never the newest, only ``mine``: those this saver
    wrote). Returns the saves, newest first (by the saver's own count, never by mtime).

    The save needs about what the last save took, else ``expected`` (the object's size)."""
    saves = manifest.order(plan["saves"], entries)
    needed = saves[0][1] if saves else expected
    if not needed:
        return saves
    available, limit = available_bytes(plan, mountpoint)
    newest_name = saves[0][0] if saves else None
    refusal = wont_fit(name, directory, needed, available, newest_name, limit)
    if refusal is None:
        return saves
    ours = [s for s in saves if s[0] in mine]  # the newest save stays until the new one lands
    doomed = [s for s in ours[keep - 1 :] if s is not saves[0]] if keep else []
    refusal.older = [(s[0], s[1]) for s in reversed(saves[1:])]
    if not doomed or available + sum(s[1] for s in doomed) < needed:
        raise refusal
    room.make(guard, key, directory, [s[0] for s in doomed], name, needed, available, limit)
    return [s for s in saves if s not in doomed]


@overload
def save_checkpoint(
    save: Callable[[str], object],
    path: str | os.PathLike[str],
    *,
    keep: int | None = ...,
    series: str | None = ...,
    guard: MountGuard | None = ...,
    background: Literal[False] = ...,
    if_busy: str = ...,
    fallback: str | os.PathLike[str] | None = ...,
    on_full: str = ...,
    wait_limit_s: float | None = ...,
    recheck_s: float | None = ...,
    expected_bytes: int | None = ...,
) -> str: ...
@overload
def save_checkpoint(
    save: Callable[[str], object],
    path: str | os.PathLike[str],
    *,
    keep: int | None = ...,
    series: str | None = ...,
    guard: MountGuard | None = ...,
    background: Literal[True],
    if_busy: str = ...,
    fallback: str | os.PathLike[str] | None = ...,
    on_full: str = ...,
    wait_limit_s: float | None = ...,
    recheck_s: float | None = ...,
    expected_bytes: int | None = ...,
) -> SaveHandle: ...
def save_checkpoint(
    save: Callable[[str], object],
    path: str | os.PathLike[str],
    *,
    keep: int | None = None,
    series: str | None = None,
    guard: MountGuard | None = None,
    background: bool = False,
    if_busy: str = "wait",
    fallback: str | os.PathLike[str] | None = None,
    on_full: str = "raise",
    wait_limit_s: float | None = None,
    recheck_s: float | None = None,
    expected_bytes: int | None = None,
) -> str | SaveHandle:
    """Run ``save(tmp)`` so that ``path`` ends up holding the whole save or what it held
    before, never a part of one; returns ``path`` (normalised).

    ``save`` writes a file or a directory to the path it is given (``lambda p:
    torch.save(state, p)``; the name ends like ``path``, so ``.keras``/``.weights.h5``
    checks pass). Raises ``CheckpointWontFit`` (an OSError, ENOSPC) before calling ``save``
    when the last save of the series is larger than the free space. The series is the
    names matching the glob ``series`` (``"resnet50-epoch*.pt"``), by default those that
    differ from ``path``'s name only in their digits; ``keep=N`` then keeps the newest N of
    the saves of the series that this saver wrote (the manifest ``.trainwatch-saves.json``
    beside them), never another file.

    ``background=True`` returns a ``SaveHandle`` at once and saves on its own thread (hand
    it a state the loop leaves alone). One save is in flight at a time: another one waits
    for it at most ``DEFAULTS.save_busy_wait_s`` (``if_busy="wait"``; then a background save
    is skipped with one logged line, a foreground one raises ``SaveInFlight``), is skipped
    at once (``"skip"``) or raises ``SaveInFlight`` at once (``"refuse"``). Interpreter exit
    waits for a background save at most ``DEFAULTS.save_exit_wait_s``.

    A save that would not fit even after ``keep`` made room (fix.checkpoint.room): ``fallback=DIR``
    (or ``$TRAINWATCH_SAVE_FALLBACK``) saves it there when it fits there and says where;
    ``on_full="wait"`` pauses the save, says so inline and on the notification channels,
    checks again every ``recheck_s`` (``DEFAULTS.save_full_recheck_s``) and goes on when
    there is room, else raises ``CheckpointWontFit`` after ``wait_limit_s``
    (``DEFAULTS.save_full_wait_s``), nothing written. The default, ``"raise"``, raises at
    once. ``expected_bytes`` stands for the size of a first save (no earlier one to go by).
    The space counted is the space ours: free blocks for us, or what our quota leaves.
    """
    directory, name = _validate(save, path, keep)
    full = room.settings(fallback, on_full, wait_limit_s, recheck_s)
    if expected_bytes is not None and (
        isinstance(expected_bytes, bool)
        or not isinstance(expected_bytes, int)
        or expected_bytes < 0
    ):
        raise ValueError(f"expected_bytes must be a whole number of bytes, not {expected_bytes!r}")
    pattern = _series(series, name)
    dst = os.path.join(directory, name)
    if not claim(if_busy, dst, background):  # bad arguments were refused above, before any wait
        return skipped(dst)

    def now() -> str:
        try:
            return _decide(save, directory, name, keep, pattern, guard, full, expected_bytes)
        except SaveUnresponsive:
            raise
        except MountUnresponsive as exc:
            raise SaveUnresponsive(exc) from exc

    return start_claimed(now, dst) if background else run_claimed(now, dst)


def _series(series: str | None, name: str) -> str:
    """The series' regular expression: from the glob ``series``, or ``name``'s digits."""
    if series is None:
        return series_pattern(name)
    if not isinstance(series, str) or not series or os.sep in series:
        raise ValueError(f"series must be a glob of file names like 'epoch-*.pt', not {series!r}")
    if not fnmatch.fnmatchcase(name, series):
        raise ValueError(f"the name {name!r} is not in the series {series!r}")
    return fnmatch.translate(series)


def _decide(
    save: Callable[[str], object],
    directory: str,
    name: str,
    keep: int | None,
    pattern: str,
    guard: MountGuard | None,
    full: room.OnFull,
    expected: int | None,
) -> str:
    """Where and when the save lands (fix.checkpoint.room): here when it fits (after ``keep`` made
    room), else in the fallback directory, else after a wait for room, else an error."""
    g = guard if guard is not None else default_guard()
    pause: room.Pause | None = None
    while True:
        try:
            landed = _save_now(save, directory, name, keep, pattern, g, expected, full.acts)
        except CheckpointWontFit as exc:
            refusal = exc
        else:
            if pause is not None:
                pause.resumed(landed)
            return landed
        if full.fallback is not None and full.fallback != directory:
            try:
                landed = _save_now(
                    save, full.fallback, name, keep, pattern, g, expected or refusal.needed, True
                )
            except CheckpointWontFit as other:
                add_note(refusal, f"trainwatch: the fallback {other}")
            else:
                room.redirected(refusal, landed)
                if pause is not None:
                    pause.resumed(landed)
                return landed
        if not full.wait:
            raise refusal
        if pause is None:
            pause = room.Pause(full, refusal, name)
        pause.wait(refusal)


def _save_now(
    save: Callable[[str], object],
    directory: str,
    name: str,
    keep: int | None,
    pattern: str,
    g: MountGuard,
    expected: int | None = None,
    midway: bool = False,
) -> str:
    """The save itself, in the one save slot: plan, room, write, commit, keep, manifest.
    ``midway``: a disk or quota that fills while the save is written (it grew, or another
    writer took the room) is a ``CheckpointWontFit`` too, for the fallback or the wait."""
    dst = os.path.join(directory, name)
    entry = mount_for_path(directory, read_mounts())
    key = SAVE_KEY.format(entry.mountpoint)
    plan = _plan(g, key, directory, name, dst, pattern, quota_device(entry))
    discard(g, key, stale(directory, plan["partials"]))
    entries = manifest.parse(plan["manifest"])
    mine = manifest.owned(entries, pattern)
    saves = _room(g, key, plan, name, directory, keep, mine, entries, entry.mountpoint, expected)
    last = saves[0][1] if saves else 0
    try:
        partial = write_and_commit(save, g, key, directory, name, last)
    except OSError as exc:
        if not midway or isinstance(exc, CheckpointWontFit):
            raise
        refusal = room.filled(exc, directory, name, max(last, expected or 0))
        if refusal is None:
            raise
        raise refusal from exc
    try:
        doomed: list[str] = []
        if keep is not None:
            older = [s[0] for s in saves if s[0] != name and s[0] in mine]
            doomed = older[keep - 1 :]
            paths = [os.path.join(directory, n) for n in doomed]
            remove(g, key, paths, f"saves beyond keep={keep}")
        # this series' entries whose files are gone drop out; other series' stay
        present = {s[0] for s in saves} | (set(entries) - mine) | {name}
        _write_manifest(
            g, key, directory, partial, manifest.updated(entries, present, name, pattern, doomed)
        )
    finally:
        remove(g, key, [partial], "the save's empty directory")
    return dst


def _write_manifest(g: MountGuard, key: str, directory: str, partial: str, text: str) -> None:
    """The manifest, replaced atomically; its temporary name lies in the save's private
    directory, which goes right after (also when the helper is killed: a leftover)."""
    try:
        g.call(
            key,
            "write_text",
            what="the saves' manifest",
            path=os.path.join(directory, manifest.MANIFEST),
            text=text,
            tmp_dir=partial,
        )
    except Exception as exc:  # the save landed: a manifest not updated only keeps more
        log.warning("trainwatch: could not update the manifest in %s: %s", directory, exc)


def _plan(
    g: MountGuard,
    key: str,
    directory: str,
    name: str,
    dst: str,
    pattern: str,
    device: str | None = None,
) -> dict[str, Any]:
    """statvfs, quotas, listing and manifest of ``directory`` in the guard's helper; refused
    when it is not a directory."""
    plan = g.call(
        key,
        "saves",
        timeout=PLAN_TIMEOUT_S,
        what="statvfs and listing",
        directory=directory,
        pattern=pattern,
        partial_prefix=PARTIAL,
        manifest=manifest.MANIFEST,
        quota=True,
        device=device,
    )
    if not plan["is_dir"]:
        where = plan["target"]
        raise NotADirectoryError(
            f"cannot save to {printable(dst)}: {printable(where)} is a {plan['file_type']}, "
            "not a directory"
        )
    return plan
