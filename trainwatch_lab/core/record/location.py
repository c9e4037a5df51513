"""Where the recorded history lives: one SQLite file per machine on a local filesystem.

SQLite's locking is unsafe on network filesystems (its own FAQ), and a home directory on
NFS is common on clusters, so the directory is chosen with our own mount classification
(core.storage.mounts.classify, from /proc/self/mountinfo: nothing touches the candidate, which may
sit on a dead mount): the first candidate on a local, memory or overlay filesystem that no
other user owns or may write in wins (core.private), and passing over one says why in
a note.

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
from ..storage.mounts import classify, mount_for_path, read_mounts

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


def mount_kind(directory: str) -> tuple[str, str]:
    """(kind, "fstype at mountpoint") of the filesystem ``directory`` is (or would be) on:
    a directory of this process, so by our own mount table (an agent in a container reads
    the host's for the watched paths: core.hostfs)."""
    try:
        entry = mount_for_path(directory, read_mounts(hostfs.OWN_MOUNTINFO))
    except (LookupError, OSError):
        return "unknown", "an unknown mount"
    return classify(entry), f"{entry.fstype} at {entry.mountpoint}"


def choose(explicit_dir: str | None = None, explicit_file: str | None = None) -> Location:
    """The store's path: ``explicit_file`` (or $TRAINWATCH_STORE) as given when local, else
    the first safe candidate directory; raises LookupError when none is local."""
    notes: list[str] = []
    wanted = explicit_file or os.environ.get(STORE_ENV)
    if wanted:
        wanted = os.path.abspath(os.path.expanduser(wanted))
        kind, where = mount_kind(os.path.dirname(wanted))
        if kind in SAFE_KINDS:
            return Location(wanted)
        notes.append(f"{wanted} is on a {kind} filesystem ({where}): SQLite is unsafe there")
    for directory in candidates(explicit_dir):
        kind, where = mount_kind(directory)
        if kind not in SAFE_KINDS:
            notes.append(f"{directory} is on a {kind} filesystem ({where}): SQLite is unsafe there")
        elif (why := untrusted(directory)) is not None:  # (local: stat cannot hang)
            notes.append(f"{why}: passed over")
        else:
            return Location(os.path.join(directory, store_name()), tuple(notes))
    raise LookupError("; ".join(notes) or "no local directory for the recorded history")
