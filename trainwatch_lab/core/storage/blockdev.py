"""Which block devices are under a mount, read from ``/sys`` only (never the mount itself):
the whole disk, the disks below device-mapper and md, a loop device's backing file, and
whether the mount can be looked at from our own thread (``answers_locally``)."""

from __future__ import annotations

import os

from .. import hostfs
from .fstypes import LOCAL_FSTYPES, MEMORY_FSTYPES, is_network_block
from .mounts import MountEntry, mount_for_path, overlay_backing


def answers_locally(
    entry: MountEntry,
    device: str | None,
    sys_root: str | None = None,
    mounts: list[MountEntry] | None = None,
) -> bool:
    """Whether stat/statvfs (and the guard's sampling operations) on this mount may run on our
    own thread instead of a guard helper.

    True for memory filesystems and for kernel filesystems on a local block device: they
    answer from memory (statfs counters, cached dentries) and have no server that can stop
    answering. False for everything that can hang for good: network and FUSE filesystems
    (a daemon can die; fuseblk is FUSE too), loop devices (the backing file may sit on a
    share) and network block devices, also under device-mapper or md (LUKS on a loop file,
    LVM over nbd). Overlay (a container's root) answers as its layers do: given the mount
    table, every layer visible here must answer locally; layers outside our mount namespace
    are the container runtime's layer store on the host's disk (overlayfs refuses a network
    filesystem as its upper layer).
    """
    sys_root = sys_root or hostfs.current().sysfs
    if entry.fstype in MEMORY_FSTYPES or entry.fstype == "devtmpfs":  # tmpfs underneath
        return True
    if entry.fstype == "overlay":
        return mounts is not None and _layers_answer_locally(entry, mounts, sys_root)
    if entry.fstype not in LOCAL_FSTYPES or entry.fstype == "fuseblk" or not device:
        return False
    below = slaves(device, sys_root) if device.startswith(("dm-", "md")) else []
    return not any(d.startswith("loop") or is_network_block(d) for d in [device, *below])


def mount_answers_locally(
    entry: MountEntry, mounts: list[MountEntry], sys_root: str | None = None
) -> bool:
    """``answers_locally`` for a mount of ``mounts``, its device found in /sys."""
    sys_root = sys_root or hostfs.current().sysfs
    return answers_locally(entry, block_device_for(entry, sys_root, mounts), sys_root, mounts)


def _layers_answer_locally(entry: MountEntry, mounts: list[MountEntry], sys_root: str) -> bool:
    """Every overlay layer whose mount we can see answers locally (see answers_locally)."""
    dirs = [entry.super_option("upperdir") or ""]
    dirs += (entry.super_option("lowerdir") or "").split(":")
    for layer in filter(None, dirs):
        try:
            backing = mount_for_path(layer, mounts)
        except LookupError:
            continue  # outside our namespace: the runtime's layer store
        if backing.mount_id == entry.mount_id or backing.fstype == "overlay":
            continue  # not visible as itself (we see the overlay, "/" of a container)
        if not mount_answers_locally(backing, mounts, sys_root):
            return False
    return True


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _whole_disk(sys_dev_dir: str) -> str:
    """Name of the disk a /sys block directory belongs to: partitions report their parent."""
    real = os.path.realpath(sys_dev_dir)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def block_device_by_number(major: int, minor: int, sys_root: str | None = None) -> str | None:
    """Whole-disk /proc/diskstats name for a device number (dm-N and mdN stay themselves)."""
    sys_root = sys_root or hostfs.current().sysfs
    link = os.path.join(sys_root, "dev", "block", f"{major}:{minor}")
    if not os.path.exists(link):
        return None
    return _whole_disk(link)


def block_device_by_name(source: str, sys_root: str | None = None) -> str | None:
    """Whole-disk name for a mount source such as /dev/nvme0n1p2 or /dev/mapper/vg-root."""
    sys_root = sys_root or hostfs.current().sysfs
    if not source.startswith("/dev/"):
        return None
    name = os.path.basename(source)
    if source.startswith("/dev/mapper/"):
        for dm in _listdir(os.path.join(sys_root, "block")):
            if _read(os.path.join(sys_root, "block", dm, "dm", "name")) == name:
                return dm
        return None
    path = os.path.join(sys_root, "class", "block", name)
    return _whole_disk(path) if os.path.exists(path) else None


def block_device_for(
    entry: MountEntry, sys_root: str | None = None, mounts: list[MountEntry] | None = None
) -> str | None:
    """Whole-disk name in /proc/diskstats under a mount, or ``None`` (tmpfs, NFS, ...).

    Partitions resolve to their disk; device-mapper and md devices are reported as
    themselves (``dm-0``, ``md0``: they have their own diskstats line; see ``slaves``);
    loop devices as ``loopN`` (see ``loop_backing_file``). Overlay reports the device of its
    upperdir's mount when ``mounts`` is given. Filesystems on an anonymous device number
    (btrfs, major 0) fall back to the mount source.
    """
    sys_root = sys_root or hostfs.current().sysfs
    if entry.fstype == "overlay":
        backing = overlay_backing(entry, mounts) if mounts else None
        return block_device_for(backing, sys_root) if backing else None
    if entry.major != 0:
        name = block_device_by_number(entry.major, entry.minor, sys_root)
        if name:
            return name
    return block_device_by_name(entry.source, sys_root)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def slaves(name: str, sys_root: str | None = None) -> list[str]:
    """Whole disks under a dm/md device, recursively (dm over md over disks -> the disks)."""
    sys_root = sys_root or hostfs.current().sysfs
    found: list[str] = []
    seen: set[str] = set()

    def walk(dev: str) -> None:
        if dev in seen:
            return
        seen.add(dev)
        below = _listdir(os.path.join(sys_root, "block", dev, "slaves"))
        if not below:
            if dev != name:
                found.append(dev)
            return
        for slave in below:
            part = os.path.join(sys_root, "class", "block", slave)
            walk(_whole_disk(part) if os.path.exists(part) else slave)

    walk(name)
    return found


def loop_backing_file(name: str, sys_root: str | None = None) -> str | None:
    """The file a loop device reads from (``/sys/block/loopN/loop/backing_file``)."""
    sys_root = sys_root or hostfs.current().sysfs
    return _read(os.path.join(sys_root, "block", name, "loop", "backing_file")) or None


def physical_disks(
    device: str | None, mounts: list[MountEntry], sys_root: str | None = None, _depth: int = 0
) -> tuple[str, ...]:
    """The whole disks that really hold ``device``'s data: the slaves of a dm/md device, the
    disk under a loop device's backing file. Two paths whose disks overlap share storage: a
    loop-mounted image on the local disk is never "slower than the local disk"."""
    sys_root = sys_root or hostfs.current().sysfs
    if device is None:
        return ()
    if device.startswith(("dm-", "md")):
        return tuple(slaves(device, sys_root)) or (device,)
    backing = loop_backing_file(device, sys_root) if device.startswith("loop") else None
    if backing is None or _depth > 4:
        return (device,)
    try:
        entry = mount_for_path(backing, mounts)
    except LookupError:
        return (device,)
    below = block_device_for(entry, sys_root, mounts=mounts)
    return physical_disks(below, mounts, sys_root, _depth + 1) or (device,)
