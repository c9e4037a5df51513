"""core.storage.mounts against mountinfo snippets (tests/core/data/mountinfo_*.txt) and a fake /sys.

mountinfo_host.txt: a workstation (LVM root, md RAID, btrfs subvolume, NFS, CIFS, sshfs, a
docker overlay, a bind mount, a mount stacked over another one, nbd, ceph, 9p, gvfs, s3fs).
mountinfo_docker.txt: inside a docker container (overlay root, bind mounts, NFS, lxcfs).
mountinfo_escapes.txt: mount points with spaces, tabs, backslashes and newlines.
mountinfo_vm_fixtures.txt: recorded on the dev VM (kernel 6.18) while the fixtures of
tests/support/mounts.py were mounted (read-only tmpfs, tmpfs, loop ext4, sshfs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainwatch_lab.core.storage.blockdev import (
    answers_locally,
    block_device_by_name,
    block_device_for,
    loop_backing_file,
    slaves,
)
from trainwatch_lab.core.storage.fstypes import is_network_block
from trainwatch_lab.core.storage.mounts import (
    MountEntry,
    classify,
    fstype_of_dev,
    is_pseudo,
    mount_for_dev,
    mount_for_path,
    overlay_backing,
    parse_mountinfo,
    read_mounts,
    unescape,
    visible_mounts,
)

DATA = Path(__file__).parents[1] / "data"


def load(name: str) -> list[MountEntry]:
    return parse_mountinfo((DATA / f"mountinfo_{name}.txt").read_text())


@pytest.fixture(scope="module")
def host() -> list[MountEntry]:
    return load("host")


@pytest.fixture(scope="module")
def docker() -> list[MountEntry]:
    return load("docker")


def by_point(mounts: list[MountEntry], point: str) -> MountEntry:
    return next(m for m in reversed(mounts) if m.mountpoint == point)


# -- parsing -----------------------------------------------------------------------------


def test_parses_every_field(host: list[MountEntry]) -> None:
    root = by_point(host, "/")
    assert (root.mount_id, root.parent_id, root.major, root.minor) == (29, 1, 253, 0)
    assert root.root == "/"
    assert root.fstype == "ext4" and root.source == "/dev/mapper/vg0-root"
    assert root.options == ("rw", "relatime")
    assert root.optional == ("shared:1",)
    assert root.super_options == ("rw", "errors=remount-ro")
    assert not root.read_only
    assert root.dev == os.makedev(253, 0)


def test_octal_escapes_are_decoded() -> None:
    points = [m.mountpoint for m in load("escapes")]
    assert "/mnt/My Drive" in points
    assert "/mnt/tab\tname" in points
    assert "/mnt/back\\slash" in points
    assert "/mnt/new\nline" in points
    bind = by_point(load("escapes"), "/mnt/bind of sub")
    assert bind.root == "/sub dir" and bind.source == "my tmp"
    assert unescape(r"C:\134") == "C:\\"


def test_optional_fields_end_at_the_separator() -> None:
    slash = by_point(load("escapes"), "/mnt/back\\slash")
    assert slash.optional == ("shared:32", "master:7")
    assert slash.fstype == "vfat" and slash.source == "/dev/sdb2"


def test_read_only_from_mount_or_super_options(host: list[MountEntry], docker) -> None:
    assert by_point(host, "/snap/core20/2015").read_only
    assert by_point(docker, "/data").read_only
    assert by_point(docker, "/sys").read_only
    assert not by_point(docker, "/workspace").read_only


def test_truncated_and_garbage_lines_are_skipped(host: list[MountEntry]) -> None:
    text = (DATA / "mountinfo_host.txt").read_text()
    cut = text[: text.index("/mnt/nas") + 4]  # a read that ended mid-line
    mounts = parse_mountinfo(cut + "\nnot a mountinfo line\n\n")
    points = [m.mountpoint for m in host]
    assert [m.mountpoint for m in mounts] == points[: points.index("/mnt/nas")]


def test_reads_this_machines_mount_table() -> None:
    mounts = read_mounts()
    assert mount_for_path("/", mounts).mountpoint == "/"
    assert any(m.fstype == "proc" for m in mounts)


# -- path -> mount ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "mountpoint"),
    [
        ("/", "/"),
        ("/etc/passwd", "/"),
        ("/boot/efi/EFI", "/boot/efi"),
        ("/boot/efiX", "/"),  # prefix on a component boundary only
        ("/home/alice/remote/logs/run1", "/home/alice/remote"),
        ("/home/alice/remoteX", "/home"),
        ("/mnt/nas", "/mnt/nas"),
        ("/mnt/nas/", "/mnt/nas"),
        ("/mnt/nas/a/../b", "/mnt/nas"),
        ("/mnt/nas/../win/x", "/mnt/win"),
        ("/raid/not/yet/created", "/raid"),
    ],
)
def test_mount_for_path_longest_prefix(host: list[MountEntry], path: str, mountpoint: str) -> None:
    assert mount_for_path(path, host).mountpoint == mountpoint


def test_stacked_mount_hides_the_one_below_and_its_children(host: list[MountEntry]) -> None:
    m = mount_for_path("/mnt/stack/inner/file", host)
    assert m.source == "second"  # "inner" was mounted on "first", which is now covered
    assert {v.source for v in visible_mounts(host)} >= {"second"}
    assert not {"first", "inner"} & {v.source for v in visible_mounts(host)}


def test_escaped_mount_point_matches_the_real_path() -> None:
    mounts = load("escapes")
    assert mount_for_path("/mnt/My Drive/logs", mounts).source == "/dev/sdb1"
    assert mount_for_path("/mnt/My", mounts).mountpoint == "/"


def test_relative_and_home_paths_are_made_absolute(host: list[MountEntry]) -> None:
    assert mount_for_path(".", host).mountpoint == mount_for_path(os.getcwd(), host).mountpoint


def test_bind_mount_shares_the_device(host: list[MountEntry]) -> None:
    export = by_point(host, "/export")
    assert export.root == "/srv/exports"
    assert export.dev == by_point(host, "/").dev
    # the worker found /export/x with st_dev 253:0: the bind mount, not the root mount
    assert mount_for_dev(os.makedev(253, 0), "/export/x", host).mountpoint == "/export"
    assert mount_for_dev(os.makedev(253, 0), "/srv/y", host).mountpoint == "/"
    assert mount_for_dev(os.makedev(1, 99), "/x", host) is None


def test_mount_for_path_never_touches_the_path(host: list[MountEntry]) -> None:
    # a path that cannot exist anywhere still resolves: only the table is consulted
    assert mount_for_path("/mnt/nas/\0-not-a-real-name", host).fstype == "nfs4"


# -- classification -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "kind"),
    [
        ("/", "local"),
        ("/boot/efi", "local"),
        ("/raid", "local"),
        ("/home", "local"),  # btrfs: anonymous device number, still local
        ("/tmp", "memory"),
        ("/dev", "pseudo"),  # devtmpfs: device nodes, never storage
        ("/snap/core20/2015", "local"),
        ("/mnt/nas", "shared"),
        ("/mnt/win", "shared"),
        ("/home/alice/remote", "shared"),  # fuse.sshfs
        ("/mnt/nbd", "shared"),  # network block device
        ("/mnt/ceph", "shared"),
        ("/mnt/c", "shared"),  # 9p
        ("/mnt/s3", "shared"),  # fuse.s3fs
        ("/run/user/1000/gvfs", "local"),  # fuse.gvfsd-fuse serves this machine's desktop
        ("/var/lib/docker/overlay2/9f3c1d/merged", "overlay"),
        ("/proc", "pseudo"),
        ("/sys", "pseudo"),
    ],
)
def test_classify_host(host: list[MountEntry], point: str, kind: str) -> None:
    assert classify(by_point(host, point)) == kind


@pytest.mark.parametrize(
    ("point", "kind"),
    [
        ("/", "overlay"),
        ("/data", "shared"),
        ("/var/lib/lxcfs", "pseudo"),
        ("/proc/cpuinfo", "pseudo"),  # lxcfs serves a container's /proc files
        ("/workspace", "local"),
        ("/workspace/remote", "shared"),
        ("/dev/shm", "memory"),
        ("/sys/fs/cgroup", "pseudo"),
    ],
)
def test_classify_container(docker: list[MountEntry], point: str, kind: str) -> None:
    assert classify(by_point(docker, point)) == kind


def test_kernel_control_filesystems_are_not_shares() -> None:
    nfsd = parse_mountinfo("50 25 0:51 / /proc/fs/nfsd rw,relatime - nfsd nfsd rw\n")[0]
    assert classify(nfsd) == "pseudo"
    smb3 = parse_mountinfo("51 29 0:52 / /mnt/s rw - smb3 //srv/s rw,vers=3.0\n")[0]
    assert classify(smb3) == "shared"


KERNEL_FILESYSTEMS = [
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
    "hugetlbfs",
    "devpts",
    "binfmt_misc",
    "efivarfs",
    "selinuxfs",
    "nsfs",
    "rpc_pipefs",
    "nfsd",
]


@pytest.mark.parametrize("fstype", KERNEL_FILESYSTEMS)
def test_kernel_filesystems_are_pseudo(fstype: str) -> None:
    """Files there are kernel objects: never storage (check says not-storage), never probed."""
    (entry,) = parse_mountinfo(f"60 25 0:70 / /k rw,relatime - {fstype} {fstype} rw\n")
    assert classify(entry) == "pseudo" and is_pseudo(fstype)


@pytest.mark.parametrize(
    ("fstype", "kind"),
    [
        ("tmpfs", "memory"),  # storage, in memory: probed like a disk
        ("ramfs", "memory"),
        ("autofs", "unknown"),  # only the trigger: the real storage is mounted over it
        ("nfsdx", "shared"),  # only the exact kernel name is a kernel filesystem
    ],
)
def test_filesystems_that_hold_data_are_not_pseudo(fstype: str, kind: str) -> None:
    (entry,) = parse_mountinfo(f"60 25 0:70 / /k rw,relatime - {fstype} x rw\n")
    assert classify(entry) == kind and not is_pseudo(fstype)


def test_fstype_of_dev_on_this_machine() -> None:
    """What probe_refusal relies on: stat's st_dev names the mount, even where statvfs
    cannot tell devtmpfs from tmpfs (same magic number)."""
    mounts = read_mounts()
    assert fstype_of_dev(os.stat("/proc").st_dev, mounts) == "proc"
    assert fstype_of_dev(os.stat("/sys").st_dev, mounts) == "sysfs"
    dev = mount_for_path("/dev", mounts)
    assert fstype_of_dev(os.stat("/dev").st_dev, mounts) == dev.fstype
    assert fstype_of_dev(os.makedev(4095, 4095), mounts) is None


def test_recorded_fixture_mounts() -> None:
    mounts = load("vm_fixtures")
    base = "/tmp/pytest-of-root/pytest-141"
    sshfs = mount_for_path(f"{base}/sshfs0/mnt/work/logs", mounts)
    assert (sshfs.fstype, classify(sshfs)) == ("fuse.sshfs", "shared")
    assert sshfs.source == f"root@127.0.0.1:{base}/sshfs0/remote"
    ro = mount_for_path(f"{base}/tmpfs0/existing.txt", mounts)
    assert ro.read_only and classify(ro) == "memory"
    loop = mount_for_path(f"{base}/loop0/mnt", mounts)
    assert (loop.major, loop.minor, classify(loop)) == (7, 0, "local")
    assert mount_for_path("/dev/shm/x", mounts).mount_id == 30  # the upper of two stacked
    assert classify(mount_for_path("/sys/fs/cgroup/cpu", mounts)) == "pseudo"


def test_network_block_names() -> None:
    assert is_network_block("/dev/nbd0") and is_network_block("rbd12")
    assert not is_network_block("nvme0n1") and not is_network_block(None)


def test_overlay_backing_is_the_upperdir_mount(host: list[MountEntry], docker) -> None:
    merged = by_point(host, "/var/lib/docker/overlay2/9f3c1d/merged")
    assert merged.super_option("upperdir") == "/var/lib/docker/overlay2/9f3c1d/diff"
    assert overlay_backing(merged, host).mountpoint == "/"
    # inside the container the upperdir is a host path: nothing to report
    assert overlay_backing(by_point(docker, "/"), docker) is None


# -- block devices (fake /sys) ----------------------------------------------------------------


def _dev(sys_root: Path, rel: str, number: str | None = None, partition: bool = False) -> Path:
    d = sys_root / "devices" / rel
    d.mkdir(parents=True)
    if number:
        (d / "dev").write_text(number + "\n")
        link = sys_root / "dev" / "block" / number
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(d, link.parent))
    if partition:
        (d / "partition").write_text("1\n")
    klass = sys_root / "class" / "block" / d.name
    klass.parent.mkdir(parents=True, exist_ok=True)
    klass.symlink_to(os.path.relpath(d, klass.parent))
    if not partition:
        blk = sys_root / "block" / d.name
        blk.parent.mkdir(parents=True, exist_ok=True)
        blk.symlink_to(os.path.relpath(d, blk.parent))
    return d


def _slave(dev: Path, target: Path) -> None:
    (dev / "slaves").mkdir(exist_ok=True)
    (dev / "slaves" / target.name).symlink_to(os.path.relpath(target, dev / "slaves"))


@pytest.fixture
def sys_root(tmp_path: Path) -> Path:
    """A /sys with NVMe partitions under LVM, md RAID under LVM, SATA, a loop device, nbd."""
    s = tmp_path / "sys"
    _dev(s, "pci0000:00/nvme/nvme0/nvme0n1", "259:0")
    _dev(s, "pci0000:00/nvme/nvme0/nvme0n1/nvme0n1p1", "259:1", partition=True)
    p2 = _dev(s, "pci0000:00/nvme/nvme0/nvme0n1/nvme0n1p2", "259:2", partition=True)
    sda = _dev(s, "pci0000:00/ata1/host0/block/sda", "8:0")
    _dev(s, "pci0000:00/ata1/host0/block/sda/sda2", "8:2", partition=True)
    sdb = _dev(s, "pci0000:00/ata2/host1/block/sdb", "8:16")
    sdc = _dev(s, "pci0000:00/ata3/host2/block/sdc", "8:32")
    dm0 = _dev(s, "virtual/block/dm-0", "253:0")
    (dm0 / "dm").mkdir()
    (dm0 / "dm" / "name").write_text("vg0-root\n")
    _slave(dm0, p2)
    md0 = _dev(s, "virtual/block/md0", "9:0")
    _slave(md0, sdb)
    _slave(md0, sdc)
    dm1 = _dev(s, "virtual/block/dm-1", "253:1")
    (dm1 / "dm").mkdir()
    (dm1 / "dm" / "name").write_text("vg1-data\n")
    _slave(dm1, md0)
    loop3 = _dev(s, "virtual/block/loop3", "7:3")
    (loop3 / "loop").mkdir()
    (loop3 / "loop" / "backing_file").write_text("/var/lib/snapd/snaps/core20_2015.snap\n")
    _dev(s, "virtual/block/nbd0", "43:0")
    assert sda.exists()
    return s


@pytest.mark.parametrize(
    ("point", "device"),
    [
        ("/", "dm-0"),  # LVM: the dm device itself has the diskstats line
        ("/boot/efi", "nvme0n1"),  # partition -> whole disk
        ("/raid", "md0"),
        ("/data", "dm-1"),
        ("/home", "sda"),  # btrfs, major 0: from the source /dev/sda2
        ("/snap/core20/2015", "loop3"),
        ("/mnt/nbd", "nbd0"),
        ("/tmp", None),
        ("/mnt/nas", None),
        ("/home/alice/remote", None),
        ("/proc", None),
        ("/export", "dm-0"),  # bind mount of the root fs
    ],
)
def test_block_device_for(
    host: list[MountEntry], sys_root: Path, point: str, device: str | None
) -> None:
    assert block_device_for(by_point(host, point), str(sys_root), mounts=host) == device


def test_overlay_reports_its_backing_device(host: list[MountEntry], sys_root: Path) -> None:
    merged = by_point(host, "/var/lib/docker/overlay2/9f3c1d/merged")
    assert block_device_for(merged, str(sys_root), mounts=host) == "dm-0"
    assert block_device_for(merged, str(sys_root)) is None  # no table: cannot tell


def test_mapper_names_resolve_to_dm_devices(sys_root: Path) -> None:
    assert block_device_by_name("/dev/mapper/vg1-data", str(sys_root)) == "dm-1"
    assert block_device_by_name("/dev/mapper/missing", str(sys_root)) is None
    assert block_device_by_name("nas.lan:/share", str(sys_root)) is None


def test_slaves_reach_the_physical_disks(sys_root: Path) -> None:
    assert slaves("dm-0", str(sys_root)) == ["nvme0n1"]
    assert slaves("md0", str(sys_root)) == ["sdb", "sdc"]
    assert slaves("dm-1", str(sys_root)) == ["sdb", "sdc"]  # LVM on RAID
    assert slaves("sda", str(sys_root)) == []


def test_loop_backing_file(sys_root: Path) -> None:
    assert loop_backing_file("loop3", str(sys_root)) == "/var/lib/snapd/snaps/core20_2015.snap"
    assert loop_backing_file("sda", str(sys_root)) is None


def test_missing_sys_gives_none(host: list[MountEntry], tmp_path: Path) -> None:
    assert block_device_for(by_point(host, "/"), str(tmp_path / "nothing")) is None


def test_this_machine_root_device_is_in_diskstats() -> None:
    """On the real machine the root device resolves to a name /proc/diskstats knows."""
    mounts = read_mounts()
    root = mount_for_path("/", mounts)
    device = block_device_for(root, mounts=mounts)
    if device is None:
        pytest.skip(f"root is {root.fstype} on {root.source}: no block device here")
    with open("/proc/diskstats") as fh:
        names = {line.split()[2] for line in fh if line.strip()}
    assert device in names


def test_read_mounts_parses_again_only_when_the_table_changed(tmp_path) -> None:
    from trainwatch_lab.core.storage.mounts import read_mounts

    table = tmp_path / "mountinfo"
    table.write_text((DATA / "mountinfo_vm_fixtures.txt").read_text())
    first = read_mounts(str(table))
    assert read_mounts(str(table)) is first  # same text: the parsed list is reused
    table.write_text(table.read_text() + "999 1 0:99 / /extra rw - tmpfs tmpfs rw\n")
    changed = read_mounts(str(table))
    assert changed is not first and changed[-1].mountpoint == "/extra"


def test_read_mounts_rereads_the_real_table_only_when_the_kernel_reports_a_change(
    tmpfs_mount,
) -> None:
    """/proc/self/mountinfo is polled: an unchanged table costs no read, and a mount and an
    unmount made by anyone are seen on the next call."""
    from tests.support.mounts import unmount
    from trainwatch_lab.core.storage.mounts import read_mounts

    before = read_mounts()
    assert read_mounts() is before
    m = tmpfs_mount("1m")
    during = read_mounts()
    assert during is not before
    assert str(m.mountpoint) in {e.mountpoint for e in during}
    assert read_mounts() is during
    unmount(m.mountpoint)
    after = read_mounts()
    assert str(m.mountpoint) not in {e.mountpoint for e in after}


@pytest.mark.parametrize(
    ("point", "device", "expected"),
    [
        ("/", "dm-0", True),  # ext4 on device-mapper over a local disk
        ("/raid", "md0", True),
        ("/tmp", None, True),  # memory: no device, nothing to wait for
        ("/dev", None, True),
        ("/home", "sda", True),  # btrfs on an anonymous device number
        ("/home", None, False),  # ... unless the disk under it is unknown
        ("/snap/core20/2015", "loop3", False),  # a loop file may live on a share
        ("/mnt/nbd", "nbd0", False),  # network block device
        ("/mnt/nas", None, False),
        ("/mnt/win", None, False),
        ("/home/alice/remote", None, False),
        ("/run/user/1000/gvfs", None, False),  # "local" FUSE still has a daemon that can die
        ("/var/lib/docker/overlay2/9f3c1d/merged", None, False),
        ("/mnt/c", None, False),
        ("/proc", None, False),
    ],
)
def test_only_mounts_that_cannot_hang_are_asked_directly(
    host: list[MountEntry], point: str, device: str | None, expected: bool
) -> None:
    assert answers_locally(by_point(host, point), device) is expected


def test_device_mapper_over_a_loop_or_network_device_may_hang(
    sys_root: Path, host: list[MountEntry]
) -> None:
    """LUKS on a loop file (which may sit on a share), LVM over nbd: not answered locally;
    LVM over local disks and md RAID is."""
    root = by_point(host, "/")
    crypt = _dev(sys_root, "virtual/block/dm-7", "253:7")
    _slave(crypt, sys_root / "block" / "loop3")
    lvm = _dev(sys_root, "virtual/block/dm-8", "253:8")
    _slave(lvm, sys_root / "block" / "nbd0")
    sys = str(sys_root)
    assert answers_locally(root, "dm-0", sys) and answers_locally(root, "dm-1", sys)
    assert not answers_locally(root, "dm-7", sys)
    assert not answers_locally(root, "dm-8", sys)


def test_physical_disks_of_a_loop_device_is_the_disk_under_its_backing_file(loop_ext4) -> None:
    """A loop-mounted image lives on the disk that holds the image: slow-mount must never
    call it slower than that disk (issue 10)."""
    from trainwatch_lab.core.storage.blockdev import block_device_for, physical_disks
    from trainwatch_lab.core.storage.mounts import mount_for_path, read_mounts

    m = loop_ext4(32)
    mounts = read_mounts()
    assert m.image is not None and m.device is not None
    image_disk = block_device_for(mount_for_path(str(m.image), mounts), mounts=mounts)
    assert image_disk is not None
    assert physical_disks(m.device, mounts) == physical_disks(image_disk, mounts)
    assert physical_disks(None, mounts) == ()


LINE = "{n} 1 8:1 / /mnt/m{n} rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


def test_a_plain_file_table_is_read_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 item 14: a mount table that is a plain file (``--path.procfs`` on a copy)
    never signals a change as procfs does: it was read whole every tick. Now its stat says
    whether it changed."""
    from trainwatch_lab.core.storage import mounts

    table = tmp_path / "mountinfo"
    table.write_text("".join(LINE.format(n=n) for n in range(1, 4)))
    reads: list[str] = []
    real = mounts._read_table

    def counted(path: str, *args: object) -> str:
        reads.append(path)
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(mounts, "_read_table", counted)
    for _ in range(5):
        assert len(read_mounts(str(table))) == 3
    assert len(reads) == 1  # one read, then one stat a tick
    with table.open("a") as fh:
        fh.write(LINE.format(n=4))
    assert [m.mountpoint for m in read_mounts(str(table))][-1] == "/mnt/m4"
    assert len(reads) == 2


def test_a_table_past_the_limit_is_refused_not_read(tmp_path: Path) -> None:
    """Issue 34 item 14: a 9.8 MB table cost 387 MiB; past the limit it is one OSError
    (a note on each path), never read, nor read cut short."""
    from trainwatch_lab.core.defaults import DEFAULTS

    table = tmp_path / "mountinfo"
    line = LINE.format(n=1)
    table.write_text(line * (DEFAULTS.mountinfo_max_bytes // len(line) + 1))
    with pytest.raises(OSError) as err:
        read_mounts(str(table))
    assert "larger than 8 MiB" in str(err.value) and "\n" not in str(err.value)
