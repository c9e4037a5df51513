"""core.hostfs: the host's procfs, sysfs and root filesystem under prefixes (an agent in a
container), read by the real readers of core/ from a fake host tree (tests/support/fakehost)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import fakehost
from trainwatch_lab.core import hostfs
from trainwatch_lab.core.guard.guard import MountGuard
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.processes.discovery import Scanner, process_identity
from trainwatch_lab.core.record.location import choose
from trainwatch_lab.core.storage import mounts
from trainwatch_lab.core.storage.diskstats import DiskStatsSource
from trainwatch_lab.core.storage.mounts import classify, mount_for_path, read_mounts

HOST = hostfs.HostFS("/host/proc", "/host/sys", "/host/root")


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[fakehost.FakeHost]:
    """The fake host, read through core.hostfs for the test; today's paths again after."""
    host = fakehost.build(tmp_path)
    hostfs.use(hostfs.HostFS(str(host.proc), str(host.sys), str(host.root)))
    try:
        yield host
    finally:
        hostfs.use(hostfs.HostFS())


def test_defaults_are_todays_paths() -> None:
    local = hostfs.HostFS()
    assert (local.procfs, local.sysfs, local.rootfs) == ("/proc", "/sys", "/")
    assert local.local and local.mountinfo() == "/proc/self/mountinfo"
    assert local.host_path("/data") == "/data" == local.report_path("/data")
    assert local.proc(42, "io") == "/proc/42/io" and local.sys("block") == "/sys/block"
    assert hostfs.current() == local


@pytest.mark.parametrize(
    ("host_path", "ours"),
    [("/data", "/host/root/data"), ("/", "/host/root"), ("/a b/c", "/host/root/a b/c")],
)
def test_host_paths_round_trip(host_path: str, ours: str) -> None:
    assert HOST.host_path(host_path) == ours
    assert HOST.report_path(ours) == host_path


def test_a_path_outside_the_rootfs_is_reported_as_it_is() -> None:
    assert HOST.report_path("/host/rootless/x") == "/host/rootless/x"
    assert HOST.report_path("/proc/1") == "/proc/1"
    assert hostfs.HostFS(rootfs="/host/root/").rootfs == "/host/root"  # normalised


def test_helper_arguments_and_answers_are_translated() -> None:
    args = {"path": "/data", "directory": "/ckpt", "skip_dirs": ["/data/m"], "writes": 16}
    assert HOST.helper_args(args) == {
        hostfs.ROOT_ARG: "/host/root",
        "path": "/host/root/data",
        "directory": "/host/root/ckpt",
        "skip_dirs": ["/host/root/data/m"],
        "writes": 16,
    }
    answer = {"target": "/host/root/data", "realpath": "/host/root/x", "exists": True}
    assert HOST.helper_answer(answer) == {"target": "/data", "realpath": "/x", "exists": True}
    assert HOST.helper_answer([1, 2]) == [1, 2]


def test_init_s_mount_table_then_self_s(tmp_path: Path) -> None:
    """pid 1's mountinfo is the host's (with hostPID our own ``self`` is the container's);
    where hidepid hides it, ``self/mountinfo`` as node_exporter falls back."""
    host = fakehost.build(tmp_path)
    fs = hostfs.HostFS(str(host.proc), str(host.sys), str(host.root))
    assert fs.mountinfo() == str(host.proc / "1" / "mountinfo")
    # a rootfs alone (hostPID, our own /proc): init's table too, never the container's
    assert hostfs.HostFS(rootfs=str(host.root)).mountinfo() == "/proc/1/mountinfo"
    (host.proc / "1" / "mountinfo").unlink()
    assert fs.mountinfo() == str(host.proc / "self" / "mountinfo")


@pytest.mark.parametrize(
    ("which", "needle"),
    [
        ("procfs-missing", "--path.procfs {d}/nope: no such directory"),
        ("procfs-empty", "--path.procfs {d}/empty: not a procfs (no 1/mountinfo or self/"),
        ("sysfs-empty", "--path.sysfs {d}/empty: not a sysfs (no block in it)"),
        ("rootfs-missing", "--path.rootfs {d}/nope: no such directory"),
    ],
)
def test_bad_prefixes_are_one_line(tmp_path: Path, which: str, needle: str) -> None:
    host = fakehost.build(tmp_path / "host")
    (tmp_path / "empty").mkdir()
    where = {"procfs": str(host.proc), "sysfs": str(host.sys), "rootfs": str(host.root)}
    flag, what = which.split("-")
    where[flag] = str(tmp_path / ("nope" if what == "missing" else "empty"))
    with pytest.raises(ValueError) as err:
        hostfs.HostFS(**where).checked()
    assert str(err.value).startswith(needle.format(d=tmp_path))
    assert "\n" not in str(err.value)


def test_readers_take_the_host_s_files(fake: fakehost.FakeHost) -> None:
    """The mount table, diskstats, /sys/block and the host's pids, by the real readers."""
    mounts = read_mounts()
    assert [m.mountpoint for m in mounts] == list(fakehost.MOUNTPOINTS)
    assert classify(mount_for_path("/mnt/share/logs", mounts)) == "shared"
    assert str(fake.proc) == psutil.PROCFS_PATH
    disks = DiskStatsSource()
    disks.collect(Sample(t=0.0))
    assert set(disks.counters()) == {fakehost.DISK}  # the partition is no whole disk
    assert disks.counters()[fakehost.DISK].rd_ios == fakehost.DISK_READS
    assert process_identity(fake.pid) == (fake.pid, 123456)
    found = Scanner().scan().found
    assert list(found) == [fake.pid]
    train = found[fake.pid]
    assert train.command == "python train.py --lr 3e-4" and train.cwd == fakehost.CWD
    assert train.event_dirs == [os.path.dirname(fakehost.EVENT_FILE)]


def test_the_guard_looks_under_the_rootfs_and_answers_host_paths(
    fake: fakehost.FakeHost,
) -> None:
    """A path's look goes to ``<rootfs>/data`` (its statvfs, its existence) and comes back
    named ``/data``; a path not created yet is judged by its nearest host ancestor."""
    (fake.root / "data" / "only-on-the-host").mkdir()
    with MountGuard(10.0) as guard:
        raw = guard.call("/data", "inspect", path="/data/only-on-the-host")
        assert raw["exists"] and raw["target"] == raw["realpath"] == "/data/only-on-the-host"
        assert raw["statvfs"][2] == os.statvfs(fake.root / "data").f_blocks
        later = guard.call("/data", "inspect", path="/data/run/not-yet")
        assert not later["exists"] and later["target"] == "/data/run"


@pytest.mark.parametrize("kind", ["relative", "absolute", "relative, through a parent"])
def test_a_symlink_on_the_host_resolves_inside_the_rootfs(
    fake: fakehost.FakeHost, tmp_path: Path, kind: str
) -> None:
    """Issue 34 item 14: ``/data/link -> ../../outside`` (or ``-> /outside``) on the host
    means the host's /outside, never the container's: ``..`` stops at the rootfs and an
    absolute target starts there again, as the kernel resolves them on the host."""
    (tmp_path / "outside").mkdir()  # the container's, beside the fake host: must not be seen
    (tmp_path / "outside" / "container-only").mkdir()
    (fake.root / "outside").mkdir()  # the host's
    (fake.root / "outside" / "host-only").mkdir()
    depth = len(fake.root.relative_to("/").parts) + 1  # enough ".." to leave any prefix
    target = {
        "relative": "../" * depth + str(tmp_path / "outside").lstrip("/"),
        "absolute": "/outside",
        "relative, through a parent": "../../outside",
    }[kind]
    if kind == "relative":
        # on the host, the ".." past / stop at /: the same name under the host's root
        inside = fake.root / str(tmp_path / "outside").lstrip("/")
        inside.mkdir(parents=True)
        (inside / "host-only").mkdir()
    (fake.root / "data" / "link").symlink_to(target)
    with MountGuard(10.0) as guard:
        host_only = guard.call("/data", "inspect", path="/data/link/host-only")
        container_only = guard.call("/data", "inspect", path="/data/link/container-only")
    named = str(tmp_path / "outside") if kind == "relative" else "/outside"
    assert host_only["exists"] and host_only["realpath"] == f"{named}/host-only"  # host's name
    assert not container_only["exists"]


def test_a_symlink_loop_under_the_rootfs_is_eloop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("/a")
    with pytest.raises(OSError) as err:
        hostfs.resolve_in_root(str(tmp_path), str(tmp_path / "a" / "x"))
    assert err.value.errno == 40  # ELOOP
    assert hostfs.resolve_in_root(str(tmp_path), "/elsewhere") == "/elsewhere"
    assert hostfs.resolve_in_root(str(tmp_path), str(tmp_path / "new/../x")) == str(tmp_path / "x")


def test_the_host_s_procfs_elsewhere_is_watched_for_changes(tmp_path: Path) -> None:
    """/host/proc/1/mountinfo is procfs too: one poll() per tick tells whether it changed, as
    for our own /proc (core.storage.mounts), instead of reading the whole table every tick."""
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "proc").symlink_to("/proc")  # procfs at another path
    table = str(tmp_path / "host" / "proc" / "self" / "mountinfo")
    try:
        assert read_mounts(table) == read_mounts("/proc/self/mountinfo")
        assert table in mounts._change_watchers
    finally:
        fd, _ = mounts._change_watchers.pop(table, (None, None))
        if fd is not None:
            os.close(fd)


def test_a_mount_table_in_a_plain_file_is_read_again_when_it_changes(
    fake: fakehost.FakeHost,
) -> None:
    """A plain file (a copy of the host's table) signals nothing to poll(): it is read each
    time, so a mount added on the "host" shows."""
    table = fake.proc / "1" / "mountinfo"
    assert len(read_mounts()) == 3
    with table.open("a") as f:
        f.write("40 21 0:60 / /scratch rw - tmpfs tmpfs rw\n")
    assert [m.mountpoint for m in read_mounts()][-1] == "/scratch"
    assert str(table) not in mounts._change_watchers


def test_the_history_s_own_directory_is_judged_by_our_own_mounts(
    fake: fakehost.FakeHost,
) -> None:
    """The recorded history is the agent's own file, in its own directories: a host whose /
    is on NFS (SQLite unsafe there) says nothing of where the agent itself can keep it."""
    (fake.proc / "1" / "mountinfo").write_text("21 1 0:50 / / rw - nfs4 server:/export rw\n")
    assert classify(read_mounts()[0]) == "shared"
    assert choose().path.endswith(".sqlite")
