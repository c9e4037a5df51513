"""A path resolved as the kernel will resolve it, touching nothing on a mount that could
hang or that is not wanted: the walk of the guard's inline calls (core.worker.inline) and
of the history's place (core.record.location).

Each component is looked up in the mount table (by its text) *before* it is ``lstat``'ed,
and the walk stops at the first one on a mount ``local`` refuses; symlinks are read and
followed by hand, ``..`` against the real directories walked so far; a component whose
``st_dev`` is not its mount's (a mount the table does not list yet) stops it, and so does
one in a directory another user may change (they could swap it for a symlink between our
look and the call).
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable

from .mounts import MountEntry, mount_for_path

MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP): past it the call fails fast, locally

Local = Callable[[MountEntry], bool]


def resolve_locally(
    path: str,
    mounts: list[MountEntry],
    local: Local,
    trusted: Callable[[os.stat_result], bool] | None = None,
) -> str | None:
    """``path`` resolved as the kernel will resolve it, or None as soon as reaching it could
    touch a mount that can hang (see the module docstring). The part of a path that does not
    exist yet is kept as written: creating it stays on the mount of its existing parent.
    ``trusted`` says whether a directory's entries can change only at our (or root's)
    hand (default: ``_only_ours``)."""
    if not path.startswith("/") or not local(mount_for_path("/", mounts)):
        return None
    pending: deque[str] = deque(path.split("/"))
    resolved: list[str] = []
    hops = 0
    parent = os.lstat("/")
    while pending:
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":  # the directories walked so far are real ones: no symlink among them
            if resolved:
                resolved.pop()
                parent = os.lstat("/" + "/".join(resolved))
            continue
        child = "/" + "/".join([*resolved, name])
        entry = mount_for_path(child, mounts)
        if not local(entry) or not (trusted or _only_ours)(parent):
            return None
        try:
            st = os.lstat(child)
        except (FileNotFoundError, NotADirectoryError):
            if _sticky_open(parent):  # anyone may create it there: as a symlink, say
                return None
            return "/" + "/".join([*resolved, name, *(p for p in pending if p)])
        except OSError:  # EACCES, ENAMETOOLONG: the operation fails the same way, here, fast
            return child
        if st.st_dev != entry.dev and entry.fstype != "btrfs":  # (btrfs: one per subvolume)
            return None  # mounted since the table was read
        if _sticky_open(parent) and st.st_uid not in (0, os.getuid()):
            return None  # someone else's entry in /tmp: theirs to swap for a symlink
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_SYMLINKS:
                return child  # ELOOP, locally
            target = os.readlink(child)
            if target.startswith("/"):
                resolved = []
            pending.extendleft(reversed(target.split("/")))
            parent = os.lstat("/") if target.startswith("/") else parent
            continue
        resolved.append(name)
        parent = st
    return "/" + "/".join(resolved)


def _sticky_open(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_ISVTX) and bool(st.st_mode & 0o002)


def _only_ours(directory: os.stat_result) -> bool:
    """Whether only we (or root) can change the entries of ``directory`` between our look and
    the operation: a directory another user can write to could have a checked path swapped
    for a symlink onto a hung share in that moment (a server running as root, watching a
    user's run). A sticky directory (/tmp) lets others add entries but not replace ours."""
    if directory.st_uid not in (0, os.getuid()):
        return False
    return not directory.st_mode & 0o022 or bool(directory.st_mode & stat.S_ISVTX)


def ours_or_our_group(directory: os.stat_result) -> bool:
    """``_only_ours``, but a directory writable by our own primary group passes too (a
    user's private group, where umask 002 makes ``~/.local`` 0775)."""
    if directory.st_gid == os.getegid() and directory.st_uid in (0, os.getuid()):
        return not directory.st_mode & 0o002 or bool(directory.st_mode & stat.S_ISVTX)
    return _only_ours(directory)
