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
import threading
from collections.abc import Iterable
from typing import Any

from .. import hostfs
from ..storage.blockdev import mount_answers_locally
from ..storage.mounts import MountEntry, read_mounts
from ..storage.resolve import Local, resolve_locally
from .main import operation

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
    return json.loads(json.dumps(operation(op)(**args)))
