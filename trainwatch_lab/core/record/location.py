"""Where the recorded history lives: one SQLite file per machine on a local filesystem.

SQLite's locking is unsafe on network filesystems (its own FAQ), and a home directory on
NFS is common on clusters, so the directory is chosen with our own mount classification
(core.storage.mounts.classify, from /proc/self/mountinfo: nothing touches the candidate, which may
sit on a dead mount): the first candidate on a local, memory or overlay filesystem that no
other user owns or may write in wins (core.private), and passing over one says why in
a note.

The path is resolved first as the kernel will resolve it (core.storage.resolve's walk: each
component looked up in the mount table before it is ``lstat``ed, symlinks read and followed
by hand), so a symlink onto a share is judged by the share and never reached, and a path
through a directory another user may change (who could point it elsewhere after our look)
is refused. An explicit file (``--store``, ``c.TrainWatch.record_path``) that is refused is
an error (``Refused``), never a silent move to another place; ``$TRAINWATCH_STORE`` and the
candidates below fall through to the next with a note.

Candidates: an explicit directory (a setting), then ``/var/lib/trainwatch-lab`` as root or
``$XDG_STATE_HOME/trainwatch-lab`` (``~/.local/state/trainwatch-lab``) otherwise, then
``/var/tmp/trainwatch-lab-<uid>`` (local on nearly every machine, kept across reboots).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from .. import hostfs
from ..private import untrusted
from ..storage.mounts import MountEntry, classify, mount_for_path, read_mounts
from ..storage.resolve import ours_or_our_group, resolve_locally

APP_DIR = "trainwatch-lab"
SAFE_KINDS = ("local", "memory", "overlay")
STORE_ENV = "TRAINWATCH_STORE"  # a file path: every surface of this user records there


@dataclass(frozen=True, slots=True)
class Location:
    """The store's file and the notes on the candidates passed over (empty when none)."""

    path: str
    notes: tuple[str, ...] = ()


def store_name() -> str:
    """``history-<host>.sqlite``: the host in the name, so two machines never share one."""
    host = socket.gethostname().split(".")[0] or "localhost"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in host)
    return f"history-{safe}.sqlite"


def candidates(explicit: str | None = None) -> list[str]:
    """Directories to try, in order (see the module doc)."""
    out = [explicit] if explicit else []
    if os.geteuid() == 0:
        out.append(f"/var/lib/{APP_DIR}")
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    out.append(os.path.join(state, APP_DIR))
    out.append(f"/var/tmp/{APP_DIR}-{os.geteuid()}")
    return [os.path.abspath(p) for p in dict.fromkeys(out)]


class Refused(LookupError):
    """An explicit store file that cannot be used: the one line that says why."""


def mount_kind(directory: str) -> tuple[str, str]:
    """(kind, "fstype at mountpoint") of the filesystem ``directory`` is (or would be) on,
    by its text (``real_directory`` resolves it first): a directory of this process, so by
    our own mount table (an agent in a container reads the host's for the watched paths:
    core.hostfs)."""
    try:
        entry = mount_for_path(directory, read_mounts(hostfs.OWN_MOUNTINFO))
    except (LookupError, OSError):
        return "unknown", "an unknown mount"
    return classify(entry), f"{entry.fstype} at {entry.mountpoint}"


def real_directory(directory: str) -> tuple[str | None, str]:
    """(the directory's real path, "") or (None, why it is no place for the history),
    touching nothing on a mount that is not local: every component is judged by its mount
    before it is looked at, symlinks are followed by hand. A last component that does not
    exist yet is made by ``Store`` with ``mkdir`` (which never follows a link planted in
    its place) and checked again then."""
    try:
        mounts = read_mounts(hostfs.OWN_MOUNTINFO)
    except OSError as exc:
        return None, f"{directory}: the mount table cannot be read ({exc.strerror})"
    unsafe: list[MountEntry] = []

    def safe(entry: MountEntry) -> bool:
        ok = classify(entry) in SAFE_KINDS
        if not ok:
            unsafe.append(entry)
        return ok

    def resolve(path: str) -> str | None:
        try:
            return resolve_locally(path, mounts, safe, ours_or_our_group)
        except (OSError, LookupError):
            return None

    real = resolve(directory)
    if real is None and not unsafe:  # perhaps only a name not made yet in a shared parent
        parent, name = os.path.split(directory.rstrip("/"))
        top = resolve(parent) if name else None
        if top is not None and not os.path.lexists(os.path.join(top, name)):
            real = os.path.join(top, name)
    if real is not None:
        return real, ""
    if unsafe:
        entry = unsafe[-1]
        kind = classify(entry)
        return None, (
            f"{directory} is on a {kind} filesystem ({entry.fstype} at {entry.mountpoint}): "
            "SQLite is unsafe there"
        )
    return None, f"{directory} is reached through a directory another user may change"


def _judge(directory: str) -> tuple[str | None, str]:
    """(the real directory, "") when it may hold the history, else (None, why)."""
    real, why = real_directory(directory)
    if real is None:
        return None, why
    bad = untrusted(real)  # (local: lstat cannot hang)
    return (None, bad) if bad is not None else (real, "")


def choose(explicit_dir: str | None = None, explicit_file: str | None = None) -> Location:
    """The store's path: ``explicit_file`` (its directory resolved) when it may hold the
    history, else ``Refused``; else ``$TRAINWATCH_STORE`` likewise, else the first safe
    candidate directory, with a note for each passed over; raises LookupError when none
    is."""
    notes: list[str] = []
    if explicit_file:
        wanted = os.path.abspath(os.path.expanduser(explicit_file))
        real, why = _judge(os.path.dirname(wanted))
        if real is None:
            raise Refused(f"refusing to record in {wanted}: {why}")
        return Location(os.path.join(real, os.path.basename(wanted)))
    env = os.environ.get(STORE_ENV)
    if env:
        wanted = os.path.abspath(os.path.expanduser(env))
        real, why = _judge(os.path.dirname(wanted))
        if real is not None:
            return Location(os.path.join(real, os.path.basename(wanted)))
        notes.append(f"${STORE_ENV} ({wanted}): {why}")
    for directory in candidates(explicit_dir):
        real, why = _judge(directory)
        if real is None:
            notes.append(f"{why}: passed over")
        else:
            return Location(os.path.join(real, store_name()), tuple(notes))
    raise LookupError("; ".join(notes) or "no local directory for the recorded history")
