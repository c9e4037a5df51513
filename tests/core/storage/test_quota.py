"""Quotas (core.storage.quota): the space under a quota feeds the space rules and names the quota.

The real tests need a kernel with quota support (CONFIG_QUOTA, CONFIG_QFMT_V2): a loop ext4
made with ``-O quota,project``, a directory given a project id and a limit by the test, and a
non-root user (nobody) writing into it. Without such a kernel they skip and say why; the
"no quota" path and the rules run everywhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.advice.test_storage import run, state
from trainwatch_lab.advice.storage import checkpoint_wont_fit, disk_almost_full
from trainwatch_lab.core.defaults import GIB, MIB
from trainwatch_lab.core.model import CheckpointInfo, Sample
from trainwatch_lab.core.paths.look import inspect_path
from trainwatch_lab.core.paths.source import PathsSource
from trainwatch_lab.core.storage.quota import (
    KINDS,
    QIF_LIMITS,
    IfDqblk,
    Quota,
    apply_quota,
    binding,
    quotactl,
    read_quotas,
)

NOBODY = 65534
PROJECT = 4242
FS_IOC_FSSETXATTR = 0x401C5820
FS_XFLAG_PROJINHERIT = 0x200
QUOTA_MKFS = ("-O", "quota,project", "-E", "quotatype=usrquota:grpquota:prjquota")


# -- the figures and the messages (constructed states) ---------------------------------
def test_a_tighter_quota_becomes_the_space_and_is_named() -> None:
    p = state("/mnt/lustre/run", mountpoint="/mnt/lustre", total_bytes=500_000 * GIB)
    apply_quota(p, Quota("user", 1000, "/mnt/lustre", 50 * GIB, int(48.2 * GIB), None, 0))
    assert p.total_bytes == 50 * GIB and p.avail_bytes == int(1.8 * GIB) + 1
    assert p.quota is not None and p.quota["fs_total_bytes"] == 500_000 * GIB
    (alert,) = run(disk_almost_full, p)
    assert "your quota on /mnt/lustre" in alert.message
    assert "of 50 GiB" in alert.message and "bigger quota" in alert.fix


def test_a_quota_with_room_to_spare_changes_nothing() -> None:
    p = state(avail_bytes=5 * GIB)
    before = p.to_json()
    apply_quota(p, Quota("group", 7, "/data", 900 * GIB, GIB, None, 0))
    assert p.to_json() == before  # the filesystem binds: its own warning, no quota named
    apply_quota(p, None)
    assert p.to_json() == before


def test_checkpoint_wont_fit_under_the_quota_says_quota_exceeded() -> None:
    ck = CheckpointInfo(
        count=3,
        newest_path="/data/run/model_3.pt",
        newest_bytes=3 * GIB,
        newest_mtime=0.0,
        cadence_s=None,
    )
    p = state(checkpoints=ck)
    apply_quota(p, Quota("project", 9, "/data", 10 * GIB, 8 * GIB, None, 0))
    (alert,) = run(checkpoint_wont_fit, p)
    assert "project 9's quota on /data" in alert.message
    assert "Disk quota exceeded" in alert.message


def test_an_inode_quota_feeds_the_inode_figures() -> None:
    p = state(inodes_total=10_000_000, inodes_free=9_000_000)
    apply_quota(p, Quota("user", 1000, "/data", None, 0, 100_000, 99_000))
    assert (p.inodes_total, p.inodes_free) == (100_000, 1_000)
    (alert,) = run(disk_almost_full, p)
    assert "inodes" in alert.message and "your quota on /data" in alert.message


def _row(kind: str, limit: int | None, used: int, ilimit: int | None, iused: int) -> dict:
    keys = ("kind", "id", "limit_bytes", "used_bytes", "inode_limit", "inodes_used")
    return dict(zip(keys, (kind, 7, limit, used, ilimit, iused), strict=True))


def test_a_spent_quota_binds_over_one_with_room_left() -> None:
    """0 left is the tightest quota (writes fail with EDQUOT), not "no limit"."""
    spent_user = _row("user", 10 * GIB, 12 * GIB, None, 0)  # over: 0 left
    group = _row("group", 20 * GIB, 10 * GIB, None, 0)  # 10 GiB left
    quota = binding({"quotas": [group, spent_user]}, "/data")
    assert quota is not None and (quota.kind, quota.left_bytes) == ("user", 0)
    p = state(mountpoint="/data", avail_bytes=100 * GIB)
    apply_quota(p, quota)
    assert p.avail_bytes == 0  # not the group's 10 GiB
    inodes_spent = _row("project", None, 0, 1000, 1000)
    inodes_room = _row("group", None, 0, 1000, 10)
    quota = binding({"quotas": [inodes_room, inodes_spent]}, "/data")
    assert quota is not None and (quota.kind, quota.inodes_left) == ("project", 0)


# -- no quota: nothing changes, said once (runs everywhere) ----------------------------
def test_no_quota_changes_nothing_and_is_said_once(tmp_path: Path) -> None:
    answer = read_quotas(str(tmp_path))
    if answer["quotas"]:
        pytest.skip(f"{tmp_path} has a quota here: {answer}")
    assert answer["none"]
    src = PathsSource([str(tmp_path)], probe=False)
    try:
        samples = []
        for _ in range(3):
            s = Sample(t=time.time())
            src.collect(s)
            samples.append(s)
    finally:
        src.close()
    notes = [s.notes.get("quota") for s in samples]
    assert notes[0] and "no quota on" in notes[0] and notes[1:] == [None, None]
    st = os.statvfs(tmp_path)
    p = samples[-1].paths[str(tmp_path)]
    assert p.quota is None and p.total_bytes == st.f_blocks * st.f_frsize


# -- a real quota on a loop ext4 -------------------------------------------------------
def _need_kernel_quotas() -> None:
    if not os.path.isdir("/proc/sys/fs/quota"):
        pytest.skip("this kernel has no disk quotas (CONFIG_QUOTA): no quota can be set")


def _set_limit(mountpoint: Path, kind: str, qid: int, hard_bytes: int) -> None:
    buf = IfDqblk(bhardlimit=hard_bytes // 1024, bsoftlimit=0, valid=QIF_LIMITS)
    fd = os.open(mountpoint, os.O_RDONLY)
    try:
        quotactl(fd, None, 0x800008, KINDS[kind], qid, buf)  # Q_SETQUOTA
    finally:
        os.close(fd)


def _set_project(directory: Path, project: int) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        raw = bytearray(fcntl.ioctl(fd, 0x801C581F, bytes(28)))  # FS_IOC_FSGETXATTR
        xflags, extsize, nextents, _old, cow = struct.unpack_from("=5I", raw)
        struct.pack_into(
            "=5I", raw, 0, xflags | FS_XFLAG_PROJINHERIT, extsize, nextents, project, cow
        )
        fcntl.ioctl(fd, FS_IOC_FSSETXATTR, bytes(raw))
    finally:
        os.close(fd)


def _write_as_nobody(path: Path, mib: int) -> None:
    subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "dd",
         "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fsync"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def quota_dir(loop_ext4: Callable[..., object]) -> Path:
    _need_kernel_quotas()
    try:
        m = loop_ext4(size_mb=128, mkfs_args=QUOTA_MKFS)
    except Exception as exc:  # mkfs too old for quotatype=, or the mount refused
        pytest.skip(f"no ext4 with quotas here: {exc}")
    run_dir = m.mountpoint / "run"  # type: ignore[attr-defined]
    run_dir.mkdir()
    os.chown(run_dir, NOBODY, NOBODY)
    return run_dir


def test_user_quota_read_for_the_user_who_writes(quota_dir: Path) -> None:
    mp = quota_dir.parent
    _set_limit(mp, "user", NOBODY, 16 * MIB)
    _write_as_nobody(quota_dir / "a.bin", 4)
    with pytest.raises(subprocess.CalledProcessError):  # the kernel enforces it
        _write_as_nobody(quota_dir / "b.bin", 20)
    answer = read_quotas(str(quota_dir), uid=NOBODY, gid=NOBODY)
    (q,) = [q for q in answer["quotas"] if q["kind"] == "user"]
    assert q["limit_bytes"] == 16 * MIB and q["used_bytes"] >= 15 * MIB


def test_project_quota_drives_the_space_rules(quota_dir: Path) -> None:
    mp = quota_dir.parent
    _set_project(quota_dir, PROJECT)
    _set_limit(mp, "project", PROJECT, 24 * MIB)
    _write_as_nobody(quota_dir / "model_1.pt", 10)
    _write_as_nobody(quota_dir / "model_2.pt", 10)  # the next 10 MiB save cannot fit
    p = inspect_path(str(quota_dir), probe=False)
    assert p.quota is not None and p.quota["kind"] == "project"
    assert p.total_bytes == 24 * MIB and p.avail_bytes is not None and p.avail_bytes < 5 * MIB
    alerts = run(disk_almost_full, p) + run(checkpoint_wont_fit, p)
    assert {a.code for a in alerts} == {"disk-almost-full", "checkpoint-wont-fit"}
    assert all(f"project {PROJECT}'s quota on {mp}" in a.message for a in alerts)
    # the live source sees the same figure each tick
    src = PathsSource([str(quota_dir)], probe=False)
    try:
        s = Sample(t=time.time())
        src.collect(s)
    finally:
        src.close()
    live = s.paths[str(quota_dir)]
    assert live.quota is not None and live.avail_bytes == p.avail_bytes
    with contextlib.suppress(OSError):
        os.unlink(quota_dir / "model_1.pt")


def test_no_quota_is_said_once_per_filesystem_not_per_path(tmp_path: Path) -> None:
    """Two watched paths on one filesystem: ``watch`` printed "no quota on /: quotas are not
    turned on; no quota on /: quotas are not turned on" (issue 36)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    if read_quotas(str(a))["quotas"]:
        pytest.skip(f"{a} has a quota here")
    src = PathsSource([str(a), str(b)], probe=False)
    try:
        s = Sample(t=time.time())
        src.collect(s)
    finally:
        src.close()
    note = s.notes.get("quota")
    assert note and note.count("no quota on") == 1, note
