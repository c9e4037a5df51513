"""One save's private directory on the target filesystem, from its making to its removal:
the caller's ``save`` writes there (or on a local disk first, checkpoint.stage), the guard's
helper fsyncs and renames the result over the real name, and whatever an interrupted save
left (SIGKILL, a crash, the helper killed mid-commit) is found by name afterwards: an
earlier save moved aside is put back, the rest removed (core.worker.saves)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

from ...core.compat import add_note
from ...core.guard.guard import MountGuard
from ...core.identity import home_tag, pid_alive
from ...core.paths.names import printable
from ...core.worker.saves import tree_bytes
from .. import scratch
from .stage import remove_stage, stage_for

log = logging.getLogger(__name__)

PARTIAL = ".tw-partial-"  # hidden: checkpoint scans and TensorBoard never take it for a save
COMMIT_BASE_S = 30.0  # fsync of a big file on a busy share takes a while ...
COMMIT_BYTES_PER_S = 20 * 1024 * 1024  # ... plus this long per byte of the save
_PARTIAL_NAME = re.compile(r"\.tw-partial-([0-9a-f]{6})-(\d+)-")
# what versions before the private directories left: a directory moved aside, "<name>.old"
_LEGACY_OLD = re.compile(r"[0-9a-f]{8}-(.+)\.old")
ACTIVE: set[str] = set()  # private directories of saves running in this process


def host_tag(home: dict[str, str] | None = None) -> str:
    """This host in a partial's name: hostname, boot id and pid namespace together, so a
    container with the same hostname never takes another's live partial for its own."""
    return home_tag(home)


def stale(directory: str, names: list[str]) -> list[dict[str, Any]]:
    """Leftovers of saves interrupted for good (SIGKILL, a crash) by this host's processes,
    as ``discard_partials`` items: where a leftover is an earlier save moved aside, the name
    it goes back to."""
    host, found = host_tag(), []
    for name in names:
        m = _PARTIAL_NAME.match(name)
        path = os.path.join(directory, name)
        if m is None or m.group(1) != host:
            continue
        pid = int(m.group(2))
        if not pid_alive(pid) or (pid == os.getpid() and path not in ACTIVE):
            legacy = _LEGACY_OLD.fullmatch(name[m.end() :])
            final = os.path.join(directory, legacy.group(1)) if legacy else None
            found.append({"path": path, "legacy_final": final})
    return found


def discard(guard: MountGuard, key: str, items: list[dict[str, Any]]) -> None:
    """Best effort, like ``remove``: an earlier save an interrupted commit moved aside is
    put back first (core.worker.saves.op_discard_partials)."""
    if not items:
        return
    try:
        done = guard.call(key, "discard_partials", what="leftovers of saves", items=items)
    except Exception as exc:
        log.warning("trainwatch: could not clean up after interrupted saves: %s", exc)
        return
    for path in done["restored"]:
        log.warning("trainwatch: %s was put back from before an interrupted save", path)


def remove(guard: MountGuard, key: str, paths: list[str], why: str) -> None:
    """Best effort: a removal that fails costs disk space, never the save."""
    if not paths:
        return
    try:
        guard.call(key, "remove", what=f"remove {why}", paths=paths)
    except Exception as exc:
        log.warning("trainwatch: could not remove %s (%s): %s", why, ", ".join(paths), exc)


def write_and_commit(
    save: Callable[[str], object], g: MountGuard, key: str, directory: str, name: str, last: int
) -> str:
    """``save`` into a private directory made for it, then fsync and rename over ``name``
    (given time for the bytes written, or ``last``, the newest save's size, when that is
    more); returns the private directory
    (empty now; the caller removes it). On any failure it goes, an earlier save moved aside
    is put back, and the note says what was found afterwards."""
    dst = os.path.join(directory, name)
    prefix = f"{PARTIAL}{host_tag()}-{os.getpid()}-"
    partial = g.call(
        key, "make_partial", what="the save's directory", directory=directory, prefix=prefix
    )
    tmp = os.path.join(partial, name)
    ACTIVE.add(partial)
    committing = False
    stage = None
    try:
        stage = stage_for(directory, last, prefix, g)
        written = os.path.join(stage, name) if stage is not None else tmp
        save(written)
        if not os.path.lexists(written):
            raise FileNotFoundError(
                f"save wrote nothing at the path it was given ({printable(written)}); it must "
                "write exactly there (numpy.save adds .npy unless the name ends with it)"
            )
        size = _written_bytes(g, key, written, stage is not None or _local(directory))
        if stage is not None:
            g.call(
                key,
                "copy_in",
                timeout=COMMIT_BASE_S + size / COMMIT_BYTES_PER_S,
                what="copy of the save onto the share",
                src=written,
                dst=tmp,
            )
        committing = True
        g.call(
            key,
            "commit",
            timeout=COMMIT_BASE_S + max(last, size) / COMMIT_BYTES_PER_S,
            what="fsync and rename of the save",
            tmp=tmp,
            dst=dst,
        )
    except BaseException as exc:
        # cleans up, then says what it left: on every Python (3.10 has no add_note)
        add_note(exc, after_failure(g, key, partial, dst, committing))
        raise
    finally:
        ACTIVE.discard(partial)
        remove_stage(stage)
    return partial


def _local(directory: str) -> bool:
    """The target is on a local disk (the mount table says so; nothing touched)."""
    return scratch.local_refusal(directory) is None


def _written_bytes(g: MountGuard, key: str, written: str, local: bool) -> int:
    """The bytes ``save`` wrote, which the copy and the commit's fsync are given time for:
    measured here on a local disk, by the guard's helper on a share (a walk of a share
    that stops answering must not hang the training)."""
    if local:
        return tree_bytes(written)
    return int(
        g.call(key, "tree_bytes", timeout=COMMIT_BASE_S, what="size of the save", path=written)
    )


def after_failure(g: MountGuard, key: str, partial: str, dst: str, committing: bool) -> str:
    """Clean up after a failed save and say what was checked: the earlier save put back if
    a commit had moved it aside, the private directory gone, and whether ``dst`` exists
    (untouched, when the failure came before the commit: only the commit renames)."""
    where = printable(dst)
    try:
        done = g.call(
            key,
            "discard_partials",
            what="the unfinished save",
            items=[{"path": partial, "legacy_final": None}],
            check=dst,
        )
    except Exception as exc:
        return (
            f"trainwatch: could not look at {where} after the failure ({exc}); the next save "
            "puts back or removes what this one left"
        )
    if done["restored"]:
        state = f"{where} was put back from the earlier save"
    elif done["exists"] and not committing:
        state = f"{where} was left as it was"
    elif done["exists"]:
        state = f"{where} is there, whole (a save lands by rename only)"
    else:
        state = f"{where} does not exist (there was no earlier save)"
    left = "nothing partial remains" if not done["left"] else "its leftover could not be removed"
    return f"trainwatch: checked after the failure: {state}; {left}"
