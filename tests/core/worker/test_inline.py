"""core.worker.inline: the guard's sampling calls run in our own process only when every file
they reach lies on a mount that cannot hang (issue 33 item 3), and answer as the helper does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.mounts import guard_helpers
from trainwatch_lab.core.guard.guard import MountGuard, MountUnresponsive
from trainwatch_lab.core.storage.blockdev import answers_locally
from trainwatch_lab.core.storage.mounts import MountEntry, parse_mountinfo, read_mounts
from trainwatch_lab.core.worker.inline import resolve_locally, runs_here

DATA = Path(__file__).resolve().parents[1] / "data"
SHARE = "/mnt/trainwatch-test-share"  # on no machine: only its line in a made-up table


def with_share(mounts: list[MountEntry]) -> tuple[list[MountEntry], object]:
    """This machine's table plus an NFS share at SHARE, and a judge that calls it remote."""
    root = next(m for m in mounts if m.mountpoint == "/")
    line = f"99999 {root.mount_id} 0:999 / {SHARE} rw - nfs4 server:/export rw"
    table = [*mounts, *parse_mountinfo(line + "\n")]

    def local(entry: MountEntry) -> bool:
        return entry.mountpoint != SHARE

    return table, local


def test_a_plain_local_path_resolves_to_itself(tmp_path: Path) -> None:
    table, local = with_share(read_mounts())
    assert resolve_locally(str(tmp_path), table, local) == str(tmp_path)
    # the part not created yet stays as written: creating it stays on its parent's mount
    assert resolve_locally(f"{tmp_path}/runs/exp1", table, local) == f"{tmp_path}/runs/exp1"


def test_a_symlink_onto_a_share_is_never_followed_here(tmp_path: Path) -> None:
    """The share's own directory is never lstat'ed: its mount is judged from the table first
    (a hung share would block that lstat for good)."""
    table, local = with_share(read_mounts())
    (tmp_path / "logs").symlink_to(f"{SHARE}/runs")
    (tmp_path / "rel").symlink_to(f"../{tmp_path.name}/logs")  # two hops, the second relative
    assert resolve_locally(str(tmp_path / "logs" / "exp1"), table, local) is None
    assert resolve_locally(str(tmp_path / "rel"), table, local) is None
    assert resolve_locally(f"{SHARE}/runs", table, local) is None


def test_dot_dot_after_a_symlink_goes_where_the_kernel_goes(tmp_path: Path) -> None:
    """``link/..`` is the parent of the link's target, not the link's directory: a textual
    normpath would judge the wrong directory."""
    table, local = with_share(read_mounts())
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "a" / "b")
    got = resolve_locally(f"{tmp_path}/link/../x", table, local)
    assert got == f"{tmp_path}/a/x" == os.path.realpath(f"{tmp_path}/link/../x")
    (tmp_path / "a" / "up").symlink_to(f"{SHARE}/deep")
    assert resolve_locally(f"{tmp_path}/link/../up/..", table, local) is None


def test_a_symlink_loop_fails_fast_here(tmp_path: Path) -> None:
    (tmp_path / "x").symlink_to(tmp_path / "y")
    (tmp_path / "y").symlink_to(tmp_path / "x")
    table, local = with_share(read_mounts())
    assert resolve_locally(str(tmp_path / "x"), table, local) is not None  # ELOOP, locally
    with MountGuard() as g:
        with pytest.raises(OSError) as raised:
            g.call("/", "statvfs", path=str(tmp_path / "x"))
        assert raised.value.errno == 40  # ELOOP
        assert g.live_pids() == []


def test_sampling_calls_on_a_local_disk_start_no_helper_and_answer_as_one(tmp_path: Path) -> None:
    (tmp_path / "ckpt-1.pt").write_bytes(b"x" * 4096)
    with MountGuard() as here, MountGuard(inline=False) as helped:
        ours = here.call("/", "inspect", path=str(tmp_path), quota=False)
        theirs = helped.call("/", "inspect", path=str(tmp_path), quota=False)
        scan = here.call("/", "scan_checkpoints", directory=str(tmp_path), budget_s=1.0)
        assert here.live_pids() == [] and here.known_pids() == []
        assert helped.live_pids() != []
    for answer in (ours, theirs):
        answer.pop("statvfs")  # free blocks move between the two looks
    assert ours == theirs
    assert scan is not None and scan["newest_bytes"] == 4096


def test_only_sampling_operations_and_local_files_run_here(tmp_path: Path) -> None:
    assert runs_here("inspect", {"path": str(tmp_path)})
    assert not runs_here("sleep", {"seconds": 0.1})  # (tests' stand-in for a hang)
    assert not runs_here("copy_ranges", {"items": []})  # fix/ file work: always a helper
    assert not runs_here("inspect", {"path": "relative/path"})
    assert not runs_here("inspect", {})


def test_overlay_answers_as_its_layers() -> None:
    """A container's root (layers outside our namespace) answers locally; an overlay whose
    layer lives on a share does not."""
    docker = parse_mountinfo((DATA / "mountinfo_docker.txt").read_text())
    root = next(m for m in docker if m.mountpoint == "/")
    assert answers_locally(root, None, mounts=docker)
    assert not answers_locally(root, None)  # without the table nothing can be said
    table, _ = with_share(read_mounts())
    line = f"99998 1 0:998 / /merged rw - overlay overlay rw,lowerdir={SHARE}/l,upperdir=/u"
    overlay = parse_mountinfo(line + "\n")[0]
    assert not answers_locally(overlay, None, mounts=[*table, overlay])


def test_a_symlink_into_a_hung_share_goes_to_a_helper_and_never_blocks(
    sshfs_mount, tmp_path: Path
) -> None:
    """The guard's key is the local disk, the path a symlink onto the paused share: the call
    goes to a helper, which times out; nothing on this thread touched the share."""
    link = tmp_path / "logs"
    link.symlink_to(sshfs_mount.path)
    with MountGuard(timeout_s=1.0) as g:
        assert g.call("/", "inspect", path=str(tmp_path))["exists"]  # (here: no helper)
        assert g.live_pids() == []
        sshfs_mount.pause()
        try:
            with pytest.raises(MountUnresponsive):
                g.call("/", "inspect", path=str(link))
            assert len(g.live_pids()) == 1  # the one that is stuck on the share
            assert set(g.live_pids()) <= {p.pid for p in guard_helpers()}
        finally:
            sshfs_mount.resume()


def test_a_directory_another_user_may_change_goes_to_a_helper(tmp_path: Path) -> None:
    """Between our look and the call, its owner could swap what we checked for a symlink
    onto a hung share: a server running as root watching a user's run asks a helper."""
    from tests.support.env import need_root

    need_root("needs root to give a directory to another user")
    table, local = with_share(read_mounts())
    theirs = tmp_path / "theirs"
    (theirs / "runs").mkdir(parents=True)
    assert resolve_locally(str(theirs / "runs"), table, local) is not None
    os.chown(theirs, 65534, 65534)
    assert resolve_locally(str(theirs / "runs"), table, local) is None
    assert resolve_locally(str(theirs), table, local) is not None  # tmp_path is ours
    os.chown(theirs, 0, 0)
    theirs.chmod(0o777)  # anyone may write, no sticky bit
    assert resolve_locally(str(theirs / "runs"), table, local) is None
    theirs.chmod(0o1777)  # sticky: others may add entries, not replace ours
    assert resolve_locally(str(theirs / "runs"), table, local) is not None
    os.chown(theirs / "runs", 65534, 65534)  # ... but theirs they may
    assert resolve_locally(str(theirs / "runs" / "x"), table, local) is None


def test_a_name_not_created_yet_in_a_sticky_directory_goes_to_a_helper(tmp_path: Path) -> None:
    """Anyone may create it in /tmp in the meantime, as a symlink onto a hung share."""
    table, local = with_share(read_mounts())
    sticky = tmp_path / "shared-tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert resolve_locally(str(sticky / "not-yet" / "runs"), table, local) is None
    (sticky / "mine").mkdir()
    assert resolve_locally(str(sticky / "mine" / "not-yet"), table, local) is not None


def test_an_inspect_that_scans_checkpoints_is_a_listing_too(tmp_path: Path) -> None:
    """``inspect(checkpoints=True)`` lists the directory's tree: a mount below it that can
    hang sends it to a helper, as the scan itself would be."""
    from trainwatch_lab.core.worker import inline

    table, _ = with_share(read_mounts())
    below = str(tmp_path / "mnt")
    line = f"99997 1 0:997 / {below} rw - nfs4 server:/x rw"
    table = [*table, *parse_mountinfo(line + "\n")]
    assert not inline._below_is_local(str(tmp_path), table, lambda m: m.fstype != "nfs4", ())
    assert inline._below_is_local(str(tmp_path), table, lambda m: m.fstype != "nfs4", (below,))
    assert inline._lists_tree("inspect", {"path": "/x", "checkpoints": True})
    assert not inline._lists_tree("inspect", {"path": "/x"})
