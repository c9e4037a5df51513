"""The guard helper's operations that fix/ uses, through a real MountGuard."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainwatch_lab.core.guard.guard import MountGuard
from trainwatch_lab.core.identity import process_home
from trainwatch_lab.core.worker import files as worker_files


@pytest.fixture
def guard() -> Iterator[MountGuard]:
    g = MountGuard(timeout_s=10.0)
    yield g
    g.close()


def test_copy_ranges_appends_in_place_and_replaces_through_a_temporary_name(
    guard: MountGuard, tmp_path: Path
) -> None:
    src, dst = tmp_path / "src", tmp_path / "share" / "sub" / "f"
    src.write_bytes(b"0123456789")
    tmp = tmp_path / "share" / "sub" / ".twmirror-x.tmp"
    whole = {"src": str(src), "dst": str(tmp), "offset": 0, "length": 6, "create": True,
             "rename_to": str(dst), "mtime_ns": 1_000_000_000}  # fmt: skip
    append = {"src": str(src), "dst": str(dst), "offset": 6, "length": 4}
    gone = {"src": str(tmp_path / "vanished"), "dst": str(tmp_path / "share" / "g"),
            "offset": 0, "length": 3}  # fmt: skip
    results = guard.call("/", "copy_ranges", items=[whole, append, gone])
    assert [{k: r[k] for k in ("copied", "end")} for r in results] == [
        {"copied": 6, "end": 6},
        {"copied": 4, "end": 10},
        {"copied": 0, "end": 0},
    ]
    assert results[2]["gone"] and results[1]["src"][:1] == [10]
    assert results[1]["digest"] == hashlib.blake2b(b"6789", digest_size=16).hexdigest()
    assert dst.read_bytes() == b"0123456789" and not tmp.exists()
    assert not (tmp_path / "share" / "g").exists()
    (tmp_path / "share" / "x").write_text("a file where a directory must go")
    blocked = {"src": str(src), "dst": str(tmp_path / "share" / "x" / "f"), "offset": 0,
               "length": 1, "create": True}  # fmt: skip
    (error,) = guard.call("/", "copy_ranges", items=[blocked])
    assert error["error"]["strerror"] in ("Not a directory", "File exists")


def test_tree_lists_regular_files_and_says_what_else_a_path_is(
    guard: MountGuard, tmp_path: Path
) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_bytes(b"abc")
    (tmp_path / "d" / ".twmirror-1.tmp").write_bytes(b"x")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "e" / "f")
    tree = guard.call("/", "tree", directory=str(tmp_path / "d"), skip_prefix=".twmirror-")
    assert list(tree["files"]) == ["e/f"] and tree["files"]["e/f"][0] == 3
    assert guard.call("/", "tree", directory=str(tmp_path / "d" / "e" / "f"))["file_type"] == "file"
    assert not guard.call("/", "tree", directory=str(tmp_path / "missing"))["exists"]


def test_saves_commit_and_remove(guard: MountGuard, tmp_path: Path) -> None:
    (tmp_path / "epoch-1.pt").write_bytes(b"1" * 10)
    (tmp_path / "epoch-2.pt").write_bytes(b"2" * 20)
    (tmp_path / "other.txt").write_text("x")
    (tmp_path / ".tw-partial-abc").write_text("x")
    plan = guard.call("/", "saves", directory=str(tmp_path), pattern=r"epoch-\d+\.pt",
                      partial_prefix=".tw-partial-")  # fmt: skip
    assert sorted((n, b) for n, b, _ in plan["saves"]) == [("epoch-1.pt", 10), ("epoch-2.pt", 20)]
    assert plan["partials"] == [".tw-partial-abc"] and plan["exists"] and plan["is_dir"]
    assert guard.call("/", "saves", directory=str(tmp_path / "new" / "dir"), pattern="x",
                      partial_prefix=".p")["target"] == str(tmp_path)  # fmt: skip
    (tmp_path / "new.tmp").mkdir()
    (tmp_path / "new.tmp" / "w").write_bytes(b"new")
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "w").write_bytes(b"old")
    assert guard.call("/", "commit", tmp=str(tmp_path / "new.tmp"), dst=str(tmp_path / "ck")) == {
        "bytes": 3
    }
    assert (tmp_path / "ck" / "w").read_bytes() == b"new" and not (tmp_path / "new.tmp").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".old")]
    (tmp_path / "f.tmp").write_bytes(b"file")
    with pytest.raises(IsADirectoryError, match="is a directory; the save wrote the other"):
        guard.call("/", "commit", tmp=str(tmp_path / "f.tmp"), dst=str(tmp_path / "ck"))
    removed = guard.call("/", "remove", paths=[str(tmp_path / "ck"), str(tmp_path / "nope")])
    assert removed == [str(tmp_path / "ck")] and not (tmp_path / "ck").exists()


def _holder(token: str, **home: object) -> dict[str, object]:
    return {**process_home(), "pid": os.getpid(), "token": token, "local": "/l", **home}


def _dead_pid() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return int(out)


@pytest.mark.parametrize("twin", [False, True])
def test_a_dead_holder_is_judged_by_pid_only_on_the_same_boot_and_pid_namespace(
    guard: MountGuard, tmp_path: Path, twin: bool
) -> None:
    """Review 5: a fresh lock of a process that is gone is taken over when it was on this
    host; one written by a container with the same hostname but another boot or pid
    namespace (its pid means nothing here) is refused until it goes stale."""
    lock = tmp_path / "share.lock"
    other = {"boot": "another-machine"} if twin else {}
    lock.write_text(json.dumps({**_holder("theirs", **other), "pid": _dead_pid()}))
    answer = guard.call("/", "claim_share", path=str(lock), holder=_holder("ours"), stale_s=600)
    assert answer["ok"] is not twin
    assert json.loads(lock.read_text())["token"] == ("theirs" if twin else "ours")


def test_two_claimers_of_a_stale_lock_never_both_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 5: claimer A reads a stale lock; before A acts, claimer B takes it over and
    writes its own. A must not remove B's fresh lock and create its own: one holder only.
    The interleaving is injected at A's read (the real read, then B's whole claim)."""
    lock = tmp_path / "share.lock"
    lock.write_text(json.dumps({**_holder("dead"), "pid": _dead_pid()}))
    real_read = worker_files.read_small
    b_answer: list[dict[str, object]] = []

    def read_then_b_claims(path: str, limit: int = 64 * 1024) -> bytes | None:
        raw = real_read(path, limit)
        if not b_answer:
            b_answer.append({})  # B's own reads go straight through
            b_answer[0] = worker_files.op_claim_share(str(lock), _holder("b"), stale_s=600)
        return raw

    monkeypatch.setattr(worker_files, "read_small", read_then_b_claims)
    # both in this process: "b" is among its live mirrors, as a second process's would be alive
    a_answer = worker_files.op_claim_share(str(lock), _holder("a"), stale_s=600, live=["b"])
    assert b_answer[0]["ok"] is True
    assert a_answer["ok"] is False, "both claimers were told they hold the share"
    assert json.loads(lock.read_text())["token"] == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["share.lock"]  # nothing left aside


def test_tree_bytes_measures_a_save_in_the_helper(guard: MountGuard, tmp_path: Path) -> None:
    """What the commit's timeout is sized from when a save went straight to a share."""
    save = tmp_path / "best"
    save.mkdir()
    (save / "weights").write_bytes(b"w" * 3000)
    (save / "optimizer").write_bytes(b"o" * 1000)
    assert guard.call("/", "tree_bytes", path=str(save)) == 4000
    assert guard.call("/", "tree_bytes", path=str(save / "weights")) == 3000


@pytest.mark.parametrize(
    ("refreshed_ago_s", "skew_s", "taken"),
    [(400, 600, False), (1000, -600, True)],
    ids=["fresh-lock-claimer-ahead", "stale-lock-claimer-behind"],
)
def test_a_locks_age_is_judged_on_the_shares_clock_not_the_claimers(
    sshfs_mount, monkeypatch: pytest.MonkeyPatch, refreshed_ago_s: int, skew_s: int, taken: bool
) -> None:
    """Issue 34 item 11: the age compared the claimer's clock with the share's mtime; a host
    10 min ahead took a lock refreshed 400 s ago (both then wrote last.ckpt), one 10 min
    behind would not take a lock left 1000 s ago by a dead host. The claimer's clock is
    injected (skewed); the lock's last refresh is set on the share."""
    share = sshfs_mount.path / f"skew{skew_s}"
    share.mkdir()
    lock = share / ".lock"
    a = _holder("a", host="host-a", boot="boot-a")  # another host: judged by age alone
    assert worker_files.op_claim_share(str(lock), a, stale_s=900)["ok"]
    when = lock.stat().st_mtime - refreshed_ago_s  # A's last refresh, on the share's clock
    os.utime(lock, (when, when))
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + skew_s)  # B's clock
    answer = worker_files.op_claim_share(str(lock), _holder("b"), stale_s=900)
    monkeypatch.undo()
    assert answer["ok"] is taken, answer
    assert json.loads(lock.read_text())["token"] == ("b" if taken else "a")
    if not taken:
        assert abs(answer["age_s"] - refreshed_ago_s) < 60, answer


def test_a_holder_renewing_while_another_host_takes_over_never_both_hold_it(
    sshfs_mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder renews and re-checks: A's lock looks stale to B (A missed its renewals
    while the share hung); A renews just as B takes it over. The interleaving is injected at
    A's read of the lock (the real read, then B's whole claim): one holder only, and the
    renewal is stamped by the share, not by A's clock (here an hour behind)."""
    lock = sshfs_mount.path / "renew" / ".lock"
    lock.parent.mkdir()
    a = _holder("a", host="host-a", boot="boot-a")
    assert worker_files.op_claim_share(str(lock), a, stale_s=900)["ok"]
    os.utime(lock, (time.time() - 1000,) * 2)
    real_read, real_time = worker_files.read_small, time.time
    b_answer: list[dict[str, object]] = []

    def read_then_b_claims(path: str, limit: int = 64 * 1024) -> bytes | None:
        raw = real_read(path, limit)
        if not b_answer:
            b_answer.append({})  # B's own reads go straight through
            with monkeypatch.context() as on_b:
                on_b.setattr(time, "time", real_time)  # B's clock is right
                b_answer[0] = worker_files.op_claim_share(str(lock), _holder("b"), stale_s=900)
        return raw

    monkeypatch.setattr(worker_files, "read_small", read_then_b_claims)
    monkeypatch.setattr(time, "time", lambda: real_time() - 3600)  # A's clock
    a_answer = worker_files.op_claim_share(str(lock), a, stale_s=900)
    monkeypatch.undo()
    holders = [t for t, ans in (("a", a_answer), ("b", b_answer[0])) if ans["ok"]]
    assert len(holders) == 1, (a_answer, b_answer)
    assert json.loads(lock.read_text())["token"] == holders[0]
    assert abs(lock.stat().st_mtime - time.time()) < 60  # the share's now


def test_a_hole_is_left_a_hole_but_never_over_bytes_the_target_holds(
    guard: MountGuard, tmp_path: Path
) -> None:
    """Issue 34 item 12: holes in the source are not written where the target has no bytes
    (it stays sparse); where it has some (a longer copy appended into), they become zeros."""
    src = tmp_path / "src"
    with open(src, "wb") as fh:
        fh.write(b"a" * 4096)
        fh.seek(4096 + (1 << 20))
        fh.write(b"b" * 10)
    dst = tmp_path / "share" / "f"
    dst.parent.mkdir()
    dst.write_bytes(b"a" * 4096 + b"x" * 20000)  # stale bytes where the source has a hole
    fresh = tmp_path / "share" / ".twmirror-1.tmp"
    size = src.stat().st_size
    items = [
        {"src": str(src), "dst": str(dst), "offset": 4096, "length": size - 4096,
         "end_here": True},
        {"src": str(src), "dst": str(fresh), "offset": 0, "length": size, "create": True},
    ]  # fmt: skip
    appended, whole = guard.call("/", "copy_ranges", items=items)
    assert dst.read_bytes() == fresh.read_bytes() == src.read_bytes()
    assert (
        appended["digest"]
        == hashlib.blake2b(
            src.read_bytes()[4096:], digest_size=worker_files.DIGEST_BYTES
        ).hexdigest()
    )
    assert whole["copied"] == size and fresh.stat().st_blocks * 512 < 64 * 1024
