"""A host's procfs, sysfs and root filesystem as a container sees them under /host (the
agent's ``--path.procfs``, ``--path.sysfs``, ``--path.rootfs``), written into a directory the
way node_exporter's collector/fixtures/proc is: plain files in procfs's formats (proc(5)).

The host: ``/`` and ``/data`` on ext4 (``/dev/vdz1``, a partition of the disk ``vdz``),
``/mnt/share`` on nfs4, and one training process, ``python train.py``, that writes a
TensorBoard event file under ``/mnt/share/logs`` from ``/data/run``. The mounts carry the
device number of the directory they are in, so the real statvfs of ``root/data`` is /data's.
Only names no real machine here has: disk ``vdz``, source ``/dev/vdz1``, an unused pid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DISK = "vdz"
PARTITION = "vdz1"
SOURCE = f"/dev/{PARTITION}"
EVENT_FILE = "/mnt/share/logs/events.out.tfevents.1700000000.node1"
CWD = "/data/run"
CHECKPOINT = "/data/run/epoch-1.pt"  # on the host only: seen only under the rootfs
CHECKPOINT_BYTES = 12345
MOUNTPOINTS = ("/", "/data", "/mnt/share")
# /proc/diskstats: major minor name, then the 11 classic counters and the 6 newer ones
DISK_READS = 25354637
DISKSTATS = (
    f" 252       0 {DISK} {DISK_READS} 34367663 1003346126 18492372 28444756 11134226"
    " 505697032 63877960 0 9653880 82621804 0 0 0 0 0 0\n"
    f" 252       1 {PARTITION} 24910 3 201090 7870 22 12 280 50 0 7810 7920 0 0 0 0 0 0\n"
)


@dataclass(frozen=True)
class FakeHost:
    top: Path
    pid: int

    @property
    def proc(self) -> Path:
        return self.top / "proc"

    @property
    def sys(self) -> Path:
        return self.top / "sys"

    @property
    def root(self) -> Path:
        return self.top / "root"

    def flags(self) -> list[str]:
        return [
            f"--path.procfs={self.proc}",
            f"--path.sysfs={self.sys}",
            f"--path.rootfs={self.root}",
        ]


def unused_pid() -> int:
    """A pid no process of this machine has (the fake process must not be a real one)."""
    pid = 4_100_000
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid


def mountinfo(major: int, minor: int) -> str:
    """The host's mount table (proc(5)'s mountinfo format)."""
    dev = f"{major}:{minor}"
    return (
        f"21 1 {dev} / / rw,relatime shared:1 - ext4 {SOURCE} rw,errors=remount-ro\n"
        f"25 21 {dev} /data /data rw,noatime shared:5 - ext4 {SOURCE} rw\n"
        f"31 21 {dev} / /mnt/share rw,relatime shared:9 - nfs4 fileserver:/export "
        "rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,addr=10.0.0.5\n"
    )


CONTAINER_MOUNTINFO = (  # what the agent's own namespace would say: never the host's
    "600 500 0:99 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
    "601 600 0:98 / /etc/hosts rw - ext4 /dev/containerdisk rw\n"
)


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def _process(proc: Path, pid: int) -> None:
    """``python train.py --lr 3e-4``: its cmdline, stat, status, io, cwd, and descriptor 3
    open for writing on a TensorBoard event file."""
    here = proc / str(pid)
    # stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice threads itrealvalue starttime ...
    stat = f"{pid} (python) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 7 3 0 0 20 0 1 0 123456 0 0\n"
    _write(here / "stat", stat)
    _write(here / "task" / str(pid) / "stat", stat)
    _write(here / "task" / str(pid) / "wchan", "0")
    _write(here / "cmdline", b"python\0train.py\0--lr\x003e-4\0")
    uid, gid = os.getuid(), os.getgid()
    ids = "\t".join([str(uid)] * 4), "\t".join([str(gid)] * 4)
    _write(here / "status", f"Name:\tpython\nUid:\t{ids[0]}\nGid:\t{ids[1]}\n")
    _write(
        here / "io",
        "rchar: 1000\nwchar: 2000\nsyscr: 10\nsyscw: 20\n"
        "read_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n",
    )
    (here / "fd").mkdir()
    os.symlink(EVENT_FILE, here / "fd" / "3")
    _write(here / "fdinfo" / "3", "pos:\t0\nflags:\t0100001\nmnt_id:\t31\n")  # O_WRONLY
    os.symlink(CWD, here / "cwd")


def build(top: Path) -> FakeHost:
    """The fake host under ``top`` (proc/, sys/, root/)."""
    top.mkdir(parents=True, exist_ok=True)
    host = FakeHost(top, unused_pid())
    st = os.stat(top)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    _write(host.proc / "1" / "mountinfo", mountinfo(major, minor))
    _write(host.proc / "self" / "mountinfo", CONTAINER_MOUNTINFO)
    _write(host.proc / "diskstats", DISKSTATS)
    _write(host.proc / "stat", "cpu  1 2 3 4\nbtime 1700000000\n")
    _process(host.proc, host.pid)
    block = host.sys / "block" / DISK
    _write(block / "queue" / "rotational", "0\n")
    _write(block / "size", "209715200\n")
    _write(block / PARTITION / "partition", "1\n")
    (host.sys / "dev" / "block").mkdir(parents=True)
    os.symlink(f"../../block/{DISK}/{PARTITION}", host.sys / "dev" / "block" / f"{major}:{minor}")
    for directory in ("data/run", "mnt/share/logs", "var/tmp"):
        (host.root / directory).mkdir(parents=True)
    (host.root / CHECKPOINT.lstrip("/")).write_bytes(b"\0" * CHECKPOINT_BYTES)
    return host
