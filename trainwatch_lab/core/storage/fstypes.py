"""The filesystem types we know, by what they mean for training I/O: shared (the data
lives on another machine), local FUSE, memory, kernel pseudo-filesystems and local disks;
and the block devices whose data lives on another machine."""

from __future__ import annotations

import ctypes
import functools
import os
import re

# Filesystems whose data lives on another machine (or is shared with other machines).
SHARED_FSTYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb3",
        "smbfs",
        "ceph",
        "lustre",
        "gpfs",
        "beegfs",
        "glusterfs",
        "9p",
        "afs",
        "openafs",
        "ocfs2",
        "gfs2",
        "fuse",  # FUSE without a subtype: we cannot tell, and most FUSE mounts are remote
    }
)
SHARED_PREFIXES = ("nfs", "smb", "cifs")
# FUSE filesystems that serve local data (or kernel data) rather than a remote share.
LOCAL_FUSE = frozenset(
    {
        "fuse.lxcfs",
        "fuse.portal",
        "fuse.gvfsd-fuse",
        "fuse.gvfs-fuse-daemon",
        "fuse.fuse-overlayfs",
        "fuse.squashfuse",
        "fuse.squashfuse_ll",
        "fuse.appimage",
        "fuse.appimaged",
        "fuse.snapfuse",
        "fuse.bindfs",
        "fuse.encfs",
        "fuse.gocryptfs",
        "fuse.ntfs-3g",
        "fuse.ntfs",
        "fuse.exfat",
        "fuse.archivemount",
        "fuse.fuse-zip",
        "fuse.xdg-document-portal",
        "fuse.doc",
    }
)
MEMORY_FSTYPES = frozenset({"tmpfs", "ramfs"})
# Kernel filesystems: files there are kernel objects, not data (a write to /proc or /sys
# changes the kernel; /dev holds device nodes). Never storage, never probed. Not autofs: it
# is only the trigger, the real storage gets mounted over it on the first access.
PSEUDO_FSTYPES = frozenset(
    {
        "devtmpfs",
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "mqueue",
        "hugetlbfs",  # mmap only: write(2) there fails with EINVAL
        "devpts",
        "binfmt_misc",
        "efivarfs",
        "selinuxfs",
        "nsfs",
        "rpc_pipefs",
        "nfsd",  # the NFS server's control files: its name looks like a share
        "fuse.lxcfs",  # a container's /proc and /sys files, served by a daemon
    }
)
# Local filesystems that sit on an anonymous device number (major 0), so major alone misleads.
LOCAL_FSTYPES = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "zfs",
        "f2fs",
        "vfat",
        "exfat",
        "ntfs",
        "ntfs3",
        "fuseblk",
        "jfs",
        "reiserfs",
        "bcachefs",
        "squashfs",
        "erofs",
        "iso9660",
        "udf",
        "hfsplus",
    }
)
# Block devices whose data lives on another machine: network block device, Ceph RBD.
_NETWORK_BLOCK = re.compile(r"^(nbd|rbd)\d+")


def is_network_block(name: str | None) -> bool:
    """A network block device or Ceph RBD (``nbd0``, ``/dev/rbd1``)."""
    return bool(name) and bool(_NETWORK_BLOCK.match(os.path.basename(name or "")))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def fs_magic(fd: int) -> int | None:
    """``f_type`` of ``fstatfs`` (os.statvfs has no filesystem type); None if it fails. Here,
    beside the types, so the mount table (procfs or a copy?) and the quota tools (Lustre or
    NFS?) both ask it without importing each other."""
    buf = ctypes.create_string_buffer(128)  # struct statfs is 120 bytes on 64-bit Linux
    if _libc().fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
