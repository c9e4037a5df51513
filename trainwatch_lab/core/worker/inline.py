"""The guard's operations run in the caller's own process, for files that cannot hang.

A helper process exists because a call on a share whose server stopped answering can sleep
for good. A call on a memory filesystem or a kernel filesystem on a local disk cannot
(``blockdev.answers_locally``), so paying a Python process per mount and lane for it is
waste: a kernel watching one local path carried six helpers (75 MiB, issue 33). The guard
asks ``run_here`` first; it runs the operation on the calling thread only when every file
the operation would reach lies on such a mount, found without touching anything else:

- each component of each path is looked up in the mount table (by its text) *before* it is
  ``lstat``'ed, and the walk stops at the first one on a mount that could hang;
- symlinks are read (``readlink`` on the local mount) and followed by hand, ``..`` against
  the real directories walked so far, exactly as the kernel will resolve them;
- a component whose ``st_dev`` is not its mount's (a mount the table does not list yet)
  hands the call back to a helper, and so does one in a directory another user may change
  (they could swap it for a symlink onto a hung share between our look and the call);
- tree listings (checkpoint scans) also need every mount below the directory to answer
  locally, or to be one the listing skips.

Only the sampling operations run here; the fix/ file operations (mirror copies, saves) and
``sleep`` (tests) always go to a helper. The answer is the helper's, byte for byte: it goes
through the same JSON, and an error that is not an OSError becomes the same WorkerFailed.

Loaded by name from core.guard.guard, as the helper process is started by name.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .. import hostfs
from ..storage.blockdev import mount_answers_locally
from ..storage.mounts import MountEntry, mount_for_path, read_mounts
from .main import OPS

MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP): past it the call fails fast, locally
# each sampling operation and the arguments that name the files it reaches
PATH_ARGS: dict[str, tuple[str, ...]] = {
    "inspect": ("path",),
    "statvfs": ("path",),
    "quota": ("path",),
    "probe": ("directory",),
    "clean_leftovers": ("directory",),
    "scan_checkpoints": ("directory",),
    "written_since": ("directory",),
    "file_sizes": ("directory",),
}
TREE_OPS = frozenset(
    {"scan_checkpoints", "written_since", "file_sizes"}
)  # they list below the directory

NOT_HERE = object()  # run_here's answer when a helper must run the call

Local = Callable[[MountEntry], bool]


class _LocalMounts:
    """Which mounts answer locally, worked out once per mount of the current table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: list[MountEntry] | None = None
        self._known: dict[int, bool] = {}

    def judge(self, mounts: list[MountEntry]) -> Local:
        with self._lock:
            if mounts is not self._table:
                self._table, self._known = mounts, {}
            known = self._known

        def local(entry: MountEntry) -> bool:
            answer = known.get(entry.mount_id)
            if answer is None:
                answer = known[entry.mount_id] = mount_answers_locally(entry, mounts)
            return answer

        return local


_MOUNTS = _LocalMounts()


def resolve_locally(path: str, mounts: list[MountEntry], local: Local) -> str | None:
    """``path`` resolved as the kernel will resolve it, or None as soon as reaching it could
    touch a mount that can hang (see the module docstring). The part of a path that does not
    exist yet is kept as written: creating it stays on the mount of its existing parent."""
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
        if not local(entry) or not _only_ours(parent):
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


def _below_is_local(
    directory: str, mounts: Iterable[MountEntry], local: Local, skip: Iterable[str]
) -> bool:
    """Every mount under ``directory`` answers locally or is one the listing skips."""
    below, skipped = directory.rstrip("/") + "/", set(skip)
    return all(
        local(m) or m.mountpoint in skipped for m in mounts if m.mountpoint.startswith(below)
    )


def _lists_tree(op: str, args: dict[str, Any]) -> bool:
    return op in TREE_OPS or (op == "inspect" and bool(args.get("checkpoints")))


def runs_here(op: str, args: dict[str, Any]) -> bool:
    """Whether ``op`` with ``args`` reaches only files on mounts that cannot hang."""
    names = PATH_ARGS.get(op)
    if names is None or not hostfs.current().local:  # (a host's tree: its own mount table)
        return False
    try:
        mounts = read_mounts()
    except OSError:
        return False
    local = _MOUNTS.judge(mounts)
    for name in names:
        path = args.get(name)
        if not isinstance(path, str):
            return False
        try:
            real = resolve_locally(path, mounts, local)
        except (OSError, LookupError):
            return False
        if real is None:
            return False
        if _lists_tree(op, args):
            # the listing skips the mount points it was given by the path as written
            skip = args.get("skip_dirs") or () if real == path else ()
            if not _below_is_local(real, mounts, local, skip):
                return False
    return True


def run_here(op: str, args: dict[str, Any]) -> Any:
    """Run ``op`` on this thread when ``runs_here``; else ``NOT_HERE``. Raises what the
    helper's answer would make the guard raise: the OSError itself, anything else as
    ``WorkerFailed`` (passed in by the guard, which owns that type)."""
    if not runs_here(op, args):
        return NOT_HERE
    return json.loads(json.dumps(OPS[op](**args)))
