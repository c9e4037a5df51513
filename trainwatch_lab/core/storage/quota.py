"""Disk quotas: the space that is really yours on a filesystem with room to spare.

A cluster filesystem with hundreds of TB free still fails a save with ``EDQUOT`` once the
user's, group's or project's quota is spent, so the quota left is what the rules must see.
Read with the ``quotactl_fd`` system call (Linux 5.14, no device name needed; ``quotactl``
on the mount's block device before that): ext4, XFS, tmpfs and any filesystem with kernel
quotas. Lustre and NFS answer no ``quotactl``: their quotas come from ``lfs quota`` and
``quota`` (core.storage.quota_tools) where those are installed. ``read_quotas`` touches the mount,
so
callers run it inside the mount guard's helper (core.worker.main's ``quota`` op) unless the mount
cannot hang.

Whose quota: the one a write is charged to, the writer's filesystem uid and gid (``Uid:`` and
``Gid:`` of /proc/PID/status, fourth field: ``process_ids``), or the directory's group where
the directory is set-group-ID (new files take its group). Supplementary groups (``Groups:``)
are charged nothing, so they are not read.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import stat
import struct
from dataclasses import dataclass
from typing import Any

from .. import hostfs
from ..model import PathState
from .quota_tools import first_limit, tool_quotas

# <linux/quota.h>: QCMD(cmd, type) = (cmd << 8) | (type & 0xff); Q_GETQUOTA = 0x800007
Q_GETQUOTA = 0x800007
Q_SETQUOTA = 0x800008
KINDS = {"user": 0, "group": 1, "project": 2}  # USRQUOTA, GRPQUOTA, PRJQUOTA
QIF_DQBLKSIZE = 1024  # dqb_*limit count 1 KiB blocks; dqb_curspace counts bytes
QIF_LIMITS = 1 | 4  # QIF_BLIMITS | QIF_ILIMITS
# quotactl_fd is in the generic syscall table (443 on x86_64 and aarch64 alike)
SYS_QUOTACTL_FD = 443
# <linux/fs.h>: FS_IOC_FSGETXATTR = _IOR('X', 31, struct fsxattr) (28 bytes): the project id
FS_IOC_FSGETXATTR = 0x801C581F
# the answers that mean "no quota here", not a failure: quotas off (ESRCH), no quota
# support (ENOSYS, ENOTTY, EOPNOTSUPP, EINVAL), another's quota (EPERM, EACCES)
NO_QUOTA = {
    errno.ESRCH: "quotas are not turned on",
    errno.ENOSYS: "the kernel has no quota support",
    errno.EOPNOTSUPP: "the filesystem has no quotas",
    errno.ENOTTY: "the filesystem has no quotas",
    errno.EINVAL: "the filesystem has no quotas",
    errno.ENODEV: "the filesystem has no quotas",
    errno.ENOTBLK: "the filesystem has no quotas",
    errno.ENOENT: "the filesystem has no quotas",
    errno.EPERM: "not allowed to read it",
    errno.EACCES: "not allowed to read it",
}


class IfDqblk(ctypes.Structure):
    """``struct if_dqblk`` of <linux/quota.h>."""

    _fields_ = [
        ("bhardlimit", ctypes.c_uint64),
        ("bsoftlimit", ctypes.c_uint64),
        ("curspace", ctypes.c_uint64),
        ("ihardlimit", ctypes.c_uint64),
        ("isoftlimit", ctypes.c_uint64),
        ("curinodes", ctypes.c_uint64),
        ("btime", ctypes.c_uint64),
        ("itime", ctypes.c_uint64),
        ("valid", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(slots=True)
class Quota:
    """The quota that binds a watched path: the one with the least space (or inodes) left."""

    kind: str  # "user", "group" or "project"
    id: int
    mountpoint: str
    limit_bytes: int | None  # the lower of the soft and hard limits; None: no byte limit
    used_bytes: int
    inode_limit: int | None
    inodes_used: int

    @property
    def left_bytes(self) -> int | None:
        return None if self.limit_bytes is None else max(0, self.limit_bytes - self.used_bytes)

    @property
    def inodes_left(self) -> int | None:
        return None if self.inode_limit is None else max(0, self.inode_limit - self.inodes_used)

    def name(self) -> str:
        """How a message names it: "your quota on /mnt/lustre", "project 7's quota on /data"."""
        who = {"user": "your", "group": f"group {self.id}'s", "project": f"project {self.id}'s"}
        return f"{who[self.kind]} quota on {self.mountpoint}"


def quotactl(fd: int, device: str | None, cmd: int, kind: int, qid: int, buf: Any) -> None:
    """``quotactl_fd`` on ``fd``; ``quotactl`` on ``device`` where the kernel lacks it."""
    qcmd = (cmd << 8) | kind
    if platform.system() == "Linux":
        if _libc.syscall(SYS_QUOTACTL_FD, fd, qcmd, qid, ctypes.byref(buf)) == 0:
            return
        err = ctypes.get_errno()
        if err != errno.ENOSYS or not device:
            raise OSError(err, os.strerror(err))
    if not device:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    if _libc.quotactl(qcmd, device.encode(), qid, ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def project_id(fd: int) -> int | None:
    """The project id of an open file (ext4/XFS ``FS_IOC_FSGETXATTR``); None if it has none."""
    try:
        raw = fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28))
    except OSError:
        return None
    return struct.unpack_from("=4I", raw)[3]


def read_quotas(
    path: str,
    uid: int | None = None,
    gid: int | None = None,
    device: str | None = None,
    pid: int | None = None,
) -> dict[str, Any]:
    """Every quota with a limit that applies to writes under ``path`` by ``uid``/``gid``
    (default: the writer process ``pid``'s, else ours): ``{"quotas": [...], "none": why or
    None}``. An error that means "no quota" becomes ``none``; anything else raises."""
    if pid is not None and (uid is None or gid is None):
        with contextlib.suppress(OSError):  # gone: its quota no longer matters, ours does
            puid, pgid = process_ids(pid)
            uid, gid = puid if uid is None else uid, pgid if gid is None else gid
    uid = os.geteuid() if uid is None else uid
    gid = os.getegid() if gid is None else gid
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    quotas: list[dict[str, Any]] = []
    why: set[str] = set()
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISGID:
            gid = st.st_gid  # files made here take the directory's group, and its quota
        ids = {"user": uid, "group": gid, "project": project_id(fd)}
        if (answer := tool_quotas(fd, path, ids)) is not None:
            return answer  # Lustre, NFS: no quotactl there
        for kind, qid in ids.items():
            if qid is None:
                continue
            buf = IfDqblk()
            try:
                quotactl(fd, device, Q_GETQUOTA, KINDS[kind], qid, buf)
            except OSError as exc:
                if exc.errno not in NO_QUOTA:
                    raise
                why.add(NO_QUOTA[exc.errno])
                continue
            byte_limit = first_limit(buf.bsoftlimit, buf.bhardlimit)
            inode_limit = first_limit(buf.isoftlimit, buf.ihardlimit)
            if byte_limit is None and inode_limit is None:
                why.add(f"no {kind} limit")
                continue
            quotas.append(
                {
                    "kind": kind,
                    "id": qid,
                    "limit_bytes": None if byte_limit is None else byte_limit * QIF_DQBLKSIZE,
                    "used_bytes": buf.curspace,
                    "inode_limit": inode_limit,
                    "inodes_used": buf.curinodes,
                }
            )
    finally:
        os.close(fd)
    return {"quotas": quotas, "none": None if quotas else "; ".join(sorted(why)) or "no quota"}


def process_ids(pid: int, proc: str | None = None) -> tuple[int, int]:
    """The uid and gid a process's writes are charged to: the filesystem ids (``Uid:`` and
    ``Gid:``'s fourth field in /proc/PID/status). OSError when the process is gone."""
    proc = proc or hostfs.procfs()  # a host pid (core.hostfs)
    ids: dict[str, int] = {}
    with open(f"{proc}/{pid}/status", encoding="utf-8", errors="replace") as f:
        for line in f:
            name, _, values = line.partition(":")
            if name in ("Uid", "Gid"):
                fields = values.split()
                ids[name] = int(fields[3] if len(fields) > 3 else fields[0])
    if len(ids) != 2:
        raise OSError(f"no Uid:/Gid: in {proc}/{pid}/status")
    return ids["Uid"], ids["Gid"]


def binding(answer: dict[str, Any], mountpoint: str) -> Quota | None:
    """The quota with the least space left (inodes break ties), from ``read_quotas``."""
    found = [Quota(mountpoint=mountpoint, **q) for q in answer.get("quotas", ())]
    if not found:
        return None
    huge = 1 << 62  # no limit of that kind; 0 left is a spent quota, the tightest of all

    def left(q: Quota) -> tuple[int, int]:
        return (
            huge if q.left_bytes is None else q.left_bytes,
            huge if q.inodes_left is None else q.inodes_left,
        )

    return min(found, key=left)


def apply_quota(state: PathState, quota: Quota | None) -> None:
    """Feed the quota into the figures every rule reads, when it leaves less than the
    filesystem: the quota becomes the size and what it leaves the space (and inodes) left,
    as XFS already reports a directory under a project quota. ``state.quota`` is set only
    then (with the filesystem's own figures), so messages name the quota when it binds."""
    if quota is None or state.avail_bytes is None:
        return
    fs = {
        "fs_total_bytes": state.total_bytes,
        "fs_avail_bytes": state.avail_bytes,
        "fs_inodes_total": state.inodes_total,
        "fs_inodes_free": state.inodes_free,
    }
    left, inodes_left = quota.left_bytes, quota.inodes_left
    bound = False
    if left is not None and left < state.avail_bytes:
        state.total_bytes, state.avail_bytes = quota.limit_bytes, left
        state.free_bytes = min(state.free_bytes if state.free_bytes is not None else left, left)
        bound = True
    if inodes_left is not None and (state.inodes_free is None or inodes_left < state.inodes_free):
        state.inodes_total, state.inodes_free, bound = quota.inode_limit, inodes_left, True
    if bound:
        state.quota = {
            "kind": quota.kind,
            "id": quota.id,
            "name": quota.name(),
            "limit_bytes": quota.limit_bytes,
            "used_bytes": quota.used_bytes,
            "inode_limit": quota.inode_limit,
            "inodes_used": quota.inodes_used,
            **fs,
        }
