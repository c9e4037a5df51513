"""What a path is, for every surface alike: its key (``normalise``), its printable form,
where it really lives (``locate``, symlinks followed by the mount's helper) and the one
judgement of a path that may not exist yet (``judge``).

The mount table is read here (it never blocks); the look at the path itself goes through
core.guard.guard, so a dead mount costs at most the timeout. The per-tick source is
core.paths.source, the one full look core.paths.look.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..guard.guard import MountGuard, default_guard
from ..storage.mounts import MountEntry, is_pseudo, mount_for_dev, mount_for_path, read_mounts


def normalise(path: str) -> str:
    """The key of a path everywhere (no realpath: it stats, and may hang on a dead mount)."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}


def printable(text: str) -> str:
    """``text`` safe for one line of a terminal or a notebook: control characters (a newline
    in a file name breaks a table), backslashes and bytes that are not UTF-8 (kept by
    surrogateescape, they would fail to print at all) written as backslash escapes."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)


# what ``inspect`` says of a path that holds no data: never probed, verdict "not-storage"
SPECIAL_FILE_TYPES = frozenset(
    {"character device", "block device", "FIFO", "socket", "special file"}
)


@dataclass(frozen=True)
class Judgement:
    """What a path that may not exist yet is, for every surface alike: the check's verdict
    and note, and whether the notebook and the panel may watch it (``refusal``)."""

    key: str
    exists: bool
    checked_at: str | None  # the path, or its nearest existing ancestor; None: impossible
    file_type: str | None  # of the path itself; None when it does not exist (yet)
    impossible: str | None  # why no such path can ever exist, e.g. a file is in the way
    not_storage: str | None  # what it is instead of storage: "a FIFO", "... on proc ..."
    note: str | None  # the one line the user reads beside the numbers

    @property
    def refusal(self) -> str | None:
        """One line when nothing can ever be watched there, else None."""
        if self.impossible is not None:
            return f"{self.key} {self.impossible}"
        if self.not_storage is not None:
            return f"{self.key} is not storage: {self.not_storage}"
        return None


def short_path(path: str, parts: int = 3) -> str:
    """The last ``parts`` components (``…/gpu-lab/runs/exp1``), for a line that must stay one
    line; the same rule as the panel's ``shortPath``. The full path is said elsewhere (the subject,
    the end of the line, a tooltip)."""
    segments = [s for s in path.split("/") if s]
    return path if len(segments) <= parts else "…/" + "/".join(segments[-parts:])


def judge(key: str, raw: dict[str, Any], fstype: str | None) -> Judgement:
    """The one rule for a path that may not exist yet, from the ``inspect`` answer and the
    filesystem it is on: a logdir about to be created is judged (and probed) at its nearest
    existing ancestor, the same filesystem by construction; a file in the way makes it
    impossible; a device node, a FIFO, a socket or a kernel pseudo-filesystem is no storage.
    """
    target, exists = raw["target"], bool(raw["exists"])
    found = raw.get("file_type") or ("directory" if raw["is_dir"] else "file")
    if not exists and not raw["is_dir"]:
        why = f"cannot exist: {target} is a {found}, not a directory"
        return Judgement(key, False, None, None, why, None, None)
    what = f"a {found}" if exists and found in SPECIAL_FILE_TYPES else None
    if is_pseudo(fstype):
        what = f"{'a ' + found if exists else 'a path'} on {fstype} (a kernel pseudo-filesystem)"
    notes = [] if exists else [f"not created yet; checked at {target}"]
    if what is not None:
        notes.append(f"{what}: not storage, nothing written")
    note = "; ".join(notes) or None
    return Judgement(key, exists, target, found if exists else None, None, what, note)


@dataclass(frozen=True)
class Located:
    """Whether a path exists, and if not, its nearest existing ancestor."""

    exists: bool
    nearest: str  # the path itself when it exists
    nearest_is_dir: bool  # False: the path cannot be created (a file is in the way)
    realpath: str  # of ``nearest``
    judgement: Judgement | None = None  # see ``judge``: the note, the refusal

    @property
    def note(self) -> str | None:
        return self.judgement.note if self.judgement is not None else None

    @property
    def refusal(self) -> str | None:
        return self.judgement.refusal if self.judgement is not None else None


def locate(path: str, guard: MountGuard | None = None, timeout: float | None = None) -> Located:
    """``os.path.exists`` and friends, through the guard: safe on a kernel's main thread or
    an event loop even when the mount is dead (raises MountUnresponsive within ``timeout``).
    A thread of our own stuck in ``stat`` would instead stay stuck, and keep the process
    from exiting, until the server answers. Judged (``judge``) on the mount the helper
    really found (symlinks followed); raises OSError for ELOOP, ENAMETOOLONG, EACCES."""
    key = normalise(path)
    g = guard if guard is not None else default_guard()
    mounts = read_mounts()
    entry = mount_for_path(key, mounts)
    raw = g.call(entry.mountpoint, "inspect", timeout=timeout, what="stat", path=key)
    actual = correct_mount(entry, raw, key, mounts)
    return Located(
        raw["exists"], raw["target"], raw["is_dir"], raw["realpath"], judge(key, raw, actual.fstype)
    )


def resolved_path(raw: dict[str, Any], key: str) -> str:
    """Where ``key`` really lives: the real path of its nearest existing ancestor plus the
    part that does not exist yet."""
    target, real = raw["target"], raw["realpath"]
    rest = key[len(target) :].lstrip("/") if key.startswith(target) else ""
    return os.path.join(real, rest) if rest else real


def correct_mount(
    entry: MountEntry, raw: dict[str, Any], key: str, mounts: list[MountEntry]
) -> MountEntry:
    """The mount the worker actually found (symlinks, bind mounts): by real path, confirmed
    by ``st_dev``; the string-prefix guess stays when ``st_dev`` names no mount (btrfs)."""
    real = resolved_path(raw, key)
    dev = os.makedev(*raw["st_dev"])
    try:
        guess = mount_for_path(real, mounts)
    except LookupError:
        guess = entry
    if guess.dev == dev:
        return guess
    return mount_for_dev(dev, real, mounts) or guess
