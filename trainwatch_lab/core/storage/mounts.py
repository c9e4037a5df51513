"""Which mount a path lives on and what kind of filesystem that is (core.storage.blockdev: the disk
under it; core.storage.fstypes: the filesystem types we know).

Everything here reads only ``/proc/self/mountinfo`` and ``/sys``, never the watched path
itself: a ``stat`` on a network mount whose server stopped answering blocks in
uninterruptible sleep. The mount is therefore found by string prefix; the guarded worker
(core.guard.guard) later confirms it with ``st_dev``. We parse mountinfo directly because
``psutil.disk_partitions()`` hides network mounts unless ``all=True`` and drops the
major:minor numbers we need to find the block device.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import threading
from dataclasses import dataclass

from .. import hostfs
from ..defaults import DEFAULTS
from ..model import MountKind
from .fstypes import (
    LOCAL_FSTYPES,
    LOCAL_FUSE,
    MEMORY_FSTYPES,
    PSEUDO_FSTYPES,
    SHARED_FSTYPES,
    SHARED_PREFIXES,
    fs_magic,
    is_network_block,
)

_OCTAL = re.compile(r"\\([0-7]{3})")


def unescape(field: str) -> str:
    """Decode mountinfo's octal escapes (``\\040`` space, ``\\011`` tab, ``\\012`` newline,
    ``\\134`` backslash)."""
    if "\\" not in field:
        return field
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


@dataclass(frozen=True)
class MountEntry:
    """One line of /proc/self/mountinfo (see proc(5))."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mountpoint: str
    options: tuple[str, ...]
    fstype: str
    source: str
    super_options: tuple[str, ...]
    optional: tuple[str, ...] = ()  # shared:N, master:N, propagate_from:N, unbindable

    @property
    def read_only(self) -> bool:
        return "ro" in self.options or "ro" in self.super_options

    @property
    def dev(self) -> int:
        """The st_dev a stat() of a file on this mount reports."""
        return os.makedev(self.major, self.minor)

    def super_option(self, name: str) -> str | None:
        """Value of ``name=value`` in the superblock options (e.g. overlay's upperdir)."""
        prefix = name + "="
        for opt in self.super_options:
            if opt.startswith(prefix):
                return opt[len(prefix) :]
        return None


def _split_options(text: str) -> tuple[str, ...]:
    return tuple(unescape(o) for o in text.split(",") if o)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """Parse mountinfo text; malformed lines are skipped (the kernel never writes them, but a
    truncated read can end mid-line)."""
    entries: list[MountEntry] = []
    # "\n" only: the kernel escapes space, tab, newline and backslash in a path, nothing else,
    # and str.splitlines() would also split at \x1c-\x1e, \x85, \u2028 inside a mount point
    for line in text.split("\n"):
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
            mount_id, parent_id = int(fields[0]), int(fields[1])
            major, minor = (int(x) for x in fields[2].split(":"))
            fstype, source = fields[sep + 1], fields[sep + 2]
            super_opts = fields[sep + 3] if len(fields) > sep + 3 else ""
        except (ValueError, IndexError):
            continue
        entries.append(
            MountEntry(
                mount_id=mount_id,
                parent_id=parent_id,
                major=major,
                minor=minor,
                root=unescape(fields[3]),
                mountpoint=unescape(fields[4]),
                options=_split_options(fields[5]),
                fstype=unescape(fstype),
                source=unescape(source),
                super_options=_split_options(super_opts),
                optional=tuple(f for f in fields[6:sep] if f),
            )
        )
    return entries


_parsed: tuple[str, str, list[MountEntry]] | None = None  # (path, text, entries) last read
_table_lock = threading.Lock()
_change_watchers: dict[str, tuple[int, select.poll]] = {}  # path -> (open fd, its poll)


def _forget_watchers() -> None:
    """In a forked child: the watcher descriptors are shared with the parent, whose change
    notifications the child must not consume."""
    global _table_lock
    for fd, _ in _change_watchers.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _change_watchers.clear()
    _table_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_watchers)


def _changed_since_last_look(path: str) -> bool:
    """False only when the mount table behind ``path`` did not change since the last read:
    a /proc/*/mountinfo file signals POLLPRI|POLLERR once after each change (proc(5)), so
    one poll() replaces reading and comparing the whole table every tick; a plain file (a
    copy of a host's table, a test tree) never signals, so its stat (inode, size, times)
    is compared instead: one stat() a tick, not a read of megabytes."""
    watcher = _change_watchers.get(path)
    if watcher is not None:
        try:
            return bool(watcher[1].poll(0))
        except OSError:
            return True
    mark = _file_marks.get(path)
    if mark is None:
        return True
    try:
        return _mark(os.stat(path)) != mark
    except OSError:
        return True


def _mark(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is replaced or rewritten."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_file_marks: dict[str, tuple[int, ...]] = {}  # plain-file tables: their stat when last read


PROC_SUPER_MAGIC = 0x9FA0  # statfs(2): f_type of procfs
_not_procfs: set[str] = set()  # tables read from plain files (copies, test trees): no watcher


def _on_procfs(path: str, fd: int) -> bool:
    """Whether ``fd`` is a procfs file, whose changes poll() reports: ours (/proc), or the
    host's mounted elsewhere (core.hostfs: /host/proc); a plain file never signals."""
    if path.startswith("/proc/"):
        return True
    return fs_magic(fd) == PROC_SUPER_MAGIC


def _read_table(path: str, limit: int = DEFAULTS.mountinfo_max_bytes) -> str:
    """The table's text, at most ``limit`` bytes (OSError EFBIG past it: a table cut short
    would put paths on the wrong mounts)."""
    _file_marks.pop(path, None)
    if path not in _change_watchers and path not in _not_procfs:
        try:  # opened before the first read, so no change can slip in between
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            pass
        else:
            if _on_procfs(path, fd):
                poller = select.poll()
                poller.register(fd, select.POLLPRI | select.POLLERR)
                _change_watchers[path] = (fd, poller)
            else:
                os.close(fd)
                _not_procfs.add(path)
    # surrogateescape: mount points are bytes, not necessarily UTF-8
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        plain = path in _not_procfs
        mark = _mark(os.fstat(fh.fileno())) if plain else None
        if mark is not None and mark[2] > limit:
            raise _too_big(path, limit)
        text = fh.read(limit + 1)
    if len(text) > limit:
        raise _too_big(path, limit)
    if mark is not None:
        _file_marks[path] = mark
    return text


def _too_big(path: str, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"mount table larger than {limit >> 20} MiB, not read", path)


def read_mounts(path: str | None = None) -> list[MountEntry]:
    """The mount table (by default the host's: core.hostfs), read again only when the kernel
    reports a change, and parsed again only when its text changed (parsing every tick was a
    tenth of the tick). Callers must not mutate the returned list."""
    global _parsed
    if path is None:
        path = hostfs.current().mountinfo()
    with _table_lock:
        cached = _parsed
        if cached is not None and cached[0] == path and not _changed_since_last_look(path):
            return cached[2]
        try:
            text = _read_table(path)
        except OSError:
            _parsed = None  # the change was seen but not read: read again next time
            raise
        if cached is not None and cached[0] == path and cached[1] == text:
            return cached[2]
        entries = parse_mountinfo(text)
        _parsed = (path, text, entries)
        return entries


@dataclass
class _View:
    """What is derived from one parsed mount table: its visible mounts, and the mount of each
    path asked about (every watched path looks its mount up every tick)."""

    table: list[MountEntry]
    visible: list[MountEntry]
    lookups: dict[str, MountEntry]


_view: _View | None = None  # for the last table asked about
_MAX_LOOKUPS = 4096


def _view_of(mounts: list[MountEntry]) -> _View:
    global _view
    view = _view
    if view is None or view.table is not mounts:
        view = _view = _View(mounts, _visible_mounts(mounts), {})
    return view


def visible_mounts(mounts: list[MountEntry]) -> list[MountEntry]:
    """Drop mounts that something was mounted over (directly, or over one of their parents):
    they are in mountinfo but no path resolves to them.

    Remembered for the last list asked about: ``read_mounts`` hands out the same list until
    the table changes."""
    return _view_of(mounts).visible


def _visible_mounts(mounts: list[MountEntry]) -> list[MountEntry]:
    by_id = {m.mount_id: m for m in mounts}
    covered = {
        m.parent_id
        for m in mounts
        if m.parent_id in by_id and by_id[m.parent_id].mountpoint == m.mountpoint
    }
    reachable: dict[int, bool] = {}

    def is_reachable(m: MountEntry, depth: int = 0) -> bool:
        """Its parent chain leads to the root through mounts nothing was mounted over
        (a mount stacked on another one inherits the reachability of the one it covers)."""
        if m.mount_id not in reachable:
            parent = by_id.get(m.parent_id)
            if parent is None or parent is m or depth > 64:
                ok = True
            elif parent.mountpoint == m.mountpoint:
                ok = is_reachable(parent, depth + 1)
            else:
                ok = parent.mount_id not in covered and is_reachable(parent, depth + 1)
            reachable[m.mount_id] = ok
        return reachable[m.mount_id]

    return [m for m in mounts if m.mount_id not in covered and is_reachable(m)]


def _is_under(path: str, mountpoint: str) -> bool:
    if mountpoint == "/":
        return path.startswith("/")
    return path == mountpoint or path.startswith(mountpoint + "/")


def mount_for_path(path: str, mounts: list[MountEntry]) -> MountEntry:
    """The mount whose mountpoint is the longest prefix of the absolute path.

    No syscall touches ``path`` (it may be on a dead mount, or not exist yet). Symlinks are
    not followed here; the worker reports the real path and ``st_dev`` to correct that.
    """
    view = _view_of(mounts)
    found = view.lookups.get(path)
    if found is not None:
        return found
    key = path
    path = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    best: MountEntry | None = None
    for m in view.visible:
        if not _is_under(path, m.mountpoint):
            continue
        if best is None or len(m.mountpoint) >= len(best.mountpoint):
            best = m  # later lines win ties: the most recent mount on that point
    if best is None:
        raise LookupError(f"no mount contains {path!r}")
    if len(view.lookups) >= _MAX_LOOKUPS:
        view.lookups.clear()
    if key.startswith("/"):  # relative and ~ paths depend on the working directory, $HOME
        view.lookups[key] = best
    return best


def mount_for_dev(dev: int, path: str, mounts: list[MountEntry]) -> MountEntry | None:
    """The visible mount with device ``dev`` that best contains ``path`` (bind mounts share a
    device); ``None`` when no mount has that device (btrfs subvolumes, overlay files)."""
    candidates = [m for m in visible_mounts(mounts) if m.dev == dev]
    if not candidates:
        return None
    containing = [m for m in candidates if _is_under(path, m.mountpoint)]
    pool = containing or candidates
    return max(pool, key=lambda m: len(m.mountpoint))


def is_pseudo(fstype: str | None) -> bool:
    """A kernel filesystem (see PSEUDO_FSTYPES): nothing there is storage."""
    return fstype in PSEUDO_FSTYPES


def classify(entry: MountEntry) -> MountKind:
    """local | shared | memory | overlay | pseudo (proc, sysfs, devtmpfs and the other kernel
    filesystems) | unknown (a filesystem we do not know, on no block device)."""
    fs = entry.fstype
    if fs in PSEUDO_FSTYPES:
        return "pseudo"
    if fs in MEMORY_FSTYPES:
        return "memory"
    if fs == "overlay":
        return "overlay"
    if fs.startswith("fuse."):
        return "local" if fs in LOCAL_FUSE else "shared"
    if fs in SHARED_FSTYPES or fs.startswith(SHARED_PREFIXES):
        return "shared"
    if is_network_block(entry.source):
        return "shared"
    if fs in LOCAL_FSTYPES or entry.major != 0:
        return "local"
    return "unknown"


def fstype_of_dev(dev: int, mounts: list[MountEntry]) -> str | None:
    """The filesystem type of the mounts with device number ``dev`` (what ``stat`` says of
    a file there); None when no mount has it (btrfs subvolumes)."""
    for m in mounts:
        if m.dev == dev:
            return m.fstype
    return None


def overlay_backing(entry: MountEntry, mounts: list[MountEntry]) -> MountEntry | None:
    """The mount holding an overlay's upperdir (where its writes land), when visible here.

    Inside a container the upperdir is a host path outside our mount namespace: ``None``.
    """
    upper = entry.super_option("upperdir")
    if entry.fstype != "overlay" or not upper:
        return None
    try:
        backing = mount_for_path(upper, mounts)
    except LookupError:
        return None
    if backing.mount_id == entry.mount_id or backing.fstype == "overlay":
        return None
    return backing
