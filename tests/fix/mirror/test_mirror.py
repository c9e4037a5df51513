"""fix.local_mirror between local directories: what is copied (appended ranges, whole
rewrites), resuming, the status, bad input. The dead-share cases are test_sshfs.py."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.guard.guard import default_guard
from trainwatch_lab.core.identity import process_home
from trainwatch_lab.core.paths.names import short_path
from trainwatch_lab.core.worker import files as worker_files
from trainwatch_lab.fix.mirror import plan as mp
from trainwatch_lab.fix.mirror.lock import ShareInUse
from trainwatch_lab.fix.mirror.mirror import STATUS_FILE, Mirror, active_mirrors, local_mirror
from trainwatch_lab.fix.scratch import ROOT_ENV, base_name, local_refusal


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    local, share = tmp_path / "local", tmp_path / "share"
    local.mkdir()
    yield local, share


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_grown_files_are_copied_by_their_new_bytes(dirs: tuple[Path, Path]) -> None:
    local, share = dirs
    with Mirror(local, share, every=60) as m:
        (local / "runs" / "a").mkdir(parents=True)
        log = local / "runs" / "a" / "events.out.tfevents.1"
        with open(log, "ab") as fh:
            for i in range(20):
                fh.write(os.urandom(1000))
                fh.flush()
                if i % 5 == 4:
                    assert m.sync(10)
        (local / "metrics.csv").write_text("step,loss\n1,0.5\n")
        assert m.sync(10)
        assert tree(share) == tree(local)
        st = m.status()
        assert st.bytes_copied == 20_000 + len("step,loss\n1,0.5\n")  # no byte twice
        assert st.state == "in-sync" and st.bytes_pending == 0 and st.lag_s == 0
        assert not [p for p in share.rglob(f"{mp.TMP_PREFIX}*")]


def test_a_rewritten_file_is_copied_whole(dirs: tuple[Path, Path]) -> None:
    local, share = dirs
    f = local / "state.json"
    with Mirror(local, share, every=60) as m:
        f.write_text('{"step": 1, "note": "aaaaaaaa"}')
        assert m.sync(10)
        f.write_text('{"step": 2, "note": "bbbbbbbb"}')  # same size, other bytes
        assert m.sync(10)
        assert (share / "state.json").read_text() == f.read_text()
        with open(f, "ab") as fh:  # grown after a rewrite in place: the tail still matches
            fh.write(b"\n")
        f.write_text("{}")  # shorter
        assert m.sync(10)
        assert (share / "state.json").read_text() == "{}"
        os.replace(local / "state.json", local / "old.json")  # a rename: new inode under it
        f.write_text('{"step": 3, "note": "cccccccc"}')
        assert m.sync(10)
        assert tree(share)["state.json"] == f.read_bytes()


def test_a_restart_resumes_without_copying_again(dirs: tuple[Path, Path]) -> None:
    local, share = dirs
    (local / "big.log").write_bytes(os.urandom(300_000))
    with Mirror(local, share, every=60) as m:
        assert m.sync(10)
    with Mirror(local, share, every=60) as m:
        assert m.sync(10)
        assert m.status().bytes_copied == 0
        with open(local / "big.log", "ab") as fh:
            fh.write(b"more")
        assert m.sync(10)
        assert m.status().bytes_copied == 4  # a resumed file grows by its new bytes too
    assert tree(share) == tree(local)


def test_a_file_the_share_refuses_is_reported_and_the_rest_copied(
    dirs: tuple[Path, Path],
) -> None:
    local, share = dirs
    share.mkdir()
    (share / "sub").write_text("a file where the mirror needs a directory")
    (local / "sub").mkdir()
    (local / "sub" / "x.log").write_text("x")
    (local / "ok.log").write_text("ok")
    with Mirror(local, share, every=60) as m:
        assert not m.sync(10)
        st = m.status()
        assert st.state == "error" and "sub/x.log" in (st.error or "")
        assert "the share refused" in st.text()
        assert (share / "ok.log").read_text() == "ok"
        (share / "sub").unlink()
        assert m.sync(10)  # fixed on the share: the next round copies it
        assert m.status().state == "in-sync" and m.status().error is None


def test_big_files_go_in_chunks_through_a_temporary_name(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mp, "CHUNK_BYTES", 64 * 1024)
    local, share = dirs
    data = os.urandom(1_000_000)
    (local / "model.bin").write_bytes(data)
    with Mirror(local, share, every=60) as m:
        assert m.sync(30)
    assert (share / "model.bin").read_bytes() == data
    assert [p.name for p in share.iterdir()] == ["model.bin"]


def test_files_past_the_scan_limit_are_never_reported_as_copied(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 4: a local directory with more files than the scan limit is never "in sync":
    sync() and close() return False and the status names the limit."""
    local, share = dirs
    monkeypatch.setattr(mp, "SCAN_LIMIT", 3)
    for i in range(5):
        (local / f"{i}.log").write_text(f"log {i}")
    with Mirror(local, share, every=60) as m:
        assert not m.sync(15)
        st = m.status()
        assert st.state == "error" and "more than 3 files" in (st.error or ""), st
        assert not m.close(15)
    assert len(tree(share)) == 3  # the first three copied, the rest not, and it says so


def test_status_and_close(dirs: tuple[Path, Path]) -> None:
    local, share = dirs
    m = Mirror(local, share, every=60)
    assert m in active_mirrors()
    (local / "a.txt").write_text("hello")
    st = m.status()
    assert st.bytes_pending == 5 and st.files == 1
    assert set(st.to_json()) == {
        "local", "share", "state", "last_sync", "lag_s", "bytes_pending", "bytes_copied",
        "files", "error", "bytes_released", "bytes_dropped", "dropped",
    }  # fmt: skip
    assert m.close(10)
    assert m not in active_mirrors()
    assert (share / "a.txt").read_text() == "hello"
    published = json.loads((local / STATUS_FILE).read_text())  # for the server's panel
    assert published["pid"] == os.getpid() and published["bytes_pending"] == 0
    assert sorted(os.listdir(share)) == ["a.txt"]  # bookkeeping is never copied
    assert m.status().state == "closed" and "closed" in m.status().text()
    assert os.fspath(m) == str(local) and str(m / "x") == str(local / "x")


@pytest.mark.parametrize("how", ["renamed", "deleted", "replaced"])
def test_a_local_directory_gone_is_never_all_copied(dirs: tuple[Path, Path], how: str) -> None:
    """Issue 34 item 10: os.walk hid the error of a local directory renamed or deleted under
    the mirror, which then said in sync (21 of 150 lines on the share, exit 0)."""
    local, share = dirs
    m = Mirror(local, share, every=60)
    try:
        (local / "a.log").write_text("line 1\n")
        assert m.sync(10)
        moved = local.with_name("moved")
        if how == "deleted":
            shutil.rmtree(local)
        else:
            local.rename(moved)
            (moved / "a.log").write_text("line 1\nline 2\n")
            if how == "replaced":
                local.mkdir()
        assert not m.sync(10)
        st = m.status()
        assert st.state == "error" and str(local) in (st.error or ""), st
        assert "in sync" not in st.text() and "all copied" not in st.text()
    finally:
        assert not m.close(5)
    assert "closed" not in m.status().text()


def test_the_cli_exits_1_when_its_local_directory_was_renamed(tmp_path: Path) -> None:
    local, share = tmp_path / "runs", tmp_path / "share"
    local.mkdir()
    (local / "a.log").write_text("first\n")
    cmd = [sys.executable, "-m", "trainwatch_lab", "mirror", "--every", "0.2", "--timeout", "5"]
    proc = subprocess.Popen([*cmd, str(local), str(share)], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: (share / "a.log").exists(), 20)
        local.rename(tmp_path / "moved")
        (tmp_path / "moved" / "a.log").write_text("first\nsecond\n")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "all copied" not in err and "gone" in err, err


class TakeOverAfterFirstBatch:
    """The mirror's guard, passing every call through; after the first batch of copies,
    another host (B) takes the share's lock over, as if A's renewals had stopped reaching
    the share for longer than ``mirror_lock_stale_s``."""

    def __init__(self, lock: Path) -> None:
        self.guard, self.lock, self.batches = default_guard(), lock, 0

    def call(self, key: str, op: str, **kw: Any) -> Any:
        out = self.guard.call(key, op, **kw)
        if op == "copy_ranges":
            self.batches += 1
            if self.batches == 1:
                os.utime(self.lock, (time.time() - 1000,) * 2)
                b = {**process_home(), "host": "host-b", "boot": "b", "pid": 1, "token": "b"}
                stale_s = DEFAULTS.mirror_lock_stale_s
                assert worker_files.op_claim_share(str(self.lock), b, stale_s=stale_s)["ok"]
        return out


def test_a_long_round_renews_the_lock_and_stops_once_it_is_anothers(
    dirs: tuple[Path, Path],
) -> None:
    """Issue 34 item 11: the holder renews and re-checks its lock between batches (an
    injected clock: 400 s pass between two looks, more than a third of the stale age), so a
    round never goes on writing after another host took the share over."""
    local, share = dirs
    (local / "big.bin").write_bytes(os.urandom(3 * mp.BATCH_BYTES))  # three batches
    guard = TakeOverAfterFirstBatch(share / mp.SHARE_LOCK)
    ticks = itertools.count(step=400.0)
    m = Mirror(local, share, every=60, guard=guard, clock=lambda: next(ticks))  # type: ignore[arg-type]
    try:
        assert not m.sync(30)
        st = m.status()
        assert st.state == "error" and "another mirror copies into" in (st.error or ""), st
        assert guard.batches == 1 and not (share / "big.bin").exists()
        assert json.loads((share / mp.SHARE_LOCK).read_text())["token"] == "b"
    finally:
        m.close(5)


def test_local_mirror_puts_the_local_side_on_local_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "scratch"))
    share = tmp_path / "share" / "runs" / "exp1"
    with local_mirror(share, every=60) as m:
        assert m.local.startswith(str(tmp_path / "scratch" / base_name()) + "/")
        assert "runs-exp1" in os.path.basename(m.local)
        assert local_refusal(m.local) is None
        with pytest.raises(ShareInUse, match=r"another mirror copies into .*exp1: process"):
            local_mirror(share, every=60)  # one writer per share directory (review finding 7)
        (m / "events").write_bytes(b"e")
        assert m.sync(10)
    assert (share / "events").read_bytes() == b"e"
    with local_mirror(share, every=60) as again:  # the same directory as last time
        assert again.local == m.local


@pytest.mark.parametrize("every", [0, -1, math.nan, math.inf, "5", None])
def test_bad_every_is_refused(tmp_path: Path, every: object) -> None:
    with pytest.raises(ValueError, match="every must be a positive number of seconds"):
        local_mirror(tmp_path / "share", every=every, local_root=tmp_path / "l")  # type: ignore[arg-type]
    assert sorted(os.listdir(tmp_path)) == []


def test_a_share_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "share").write_text("x")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"share .*share is a file, not a directory"):
        local_mirror(tmp_path / "share", local_root=tmp_path / "l")
    with pytest.raises(ValueError, match=r"cannot be created: .*share is a file"):
        local_mirror(tmp_path / "share" / "exp1", local_root=tmp_path / "l")
    assert sorted(os.listdir(tmp_path)) == before
    with pytest.raises(TypeError, match="share_dir must be a path"):
        local_mirror(42)  # type: ignore[arg-type]


def test_overlapping_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="overlap"):
        Mirror(tmp_path, tmp_path / "share")
    with pytest.raises(ValueError, match="overlap"):
        Mirror(tmp_path / "l", tmp_path)


def test_local_root_on_a_network_mount_is_refused(sshfs_mount, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"local_root: .*fuse\.sshfs \(shared.*must be a local"):
        local_mirror(tmp_path / "share", local_root=sshfs_mount.path / "scratch")
    assert sorted(os.listdir(tmp_path)) == []


def test_plan_appends_only_when_the_old_bytes_are_unchanged(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"a" * 5000)
    files, _ = mp.scan(str(tmp_path))
    st = files["f"]
    held = ((0, 5000, hashlib.blake2b(b"a" * 5000, digest_size=mp.DIGEST_BYTES).hexdigest()),)
    copied = {"f": mp.Copied(5000, st.ino, st.mtime_ns, held, st.ctime_ns)}
    assert mp.plan(str(tmp_path), files, copied) == []
    with open(f, "ab") as fh:
        fh.write(b"b" * 10)
    files, _ = mp.scan(str(tmp_path))
    (job,) = mp.plan(str(tmp_path), files, copied)
    assert job.append and job.offset == 5000 and job.length == 10
    for where in (4999, 0):  # an earlier byte changed too, at the end or the head: whole
        with open(f, "r+b") as fh:
            fh.seek(where)
            fh.write(b"z")
        files, _ = mp.scan(str(tmp_path))
        (job,) = mp.plan(str(tmp_path), files, copied)
        assert not job.append and job.offset == 0


def test_trainwatch_status_shows_each_mirror(dirs: tuple[Path, Path], capsys) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    local, share = dirs
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "trainwatch_lab")
    try:
        with Mirror(local, share, every=60) as m:
            (local / "a.log").write_text("x")
            assert m.sync(10)
            capsys.readouterr()
            shell.run_line_magic("trainwatch", "status")
            out = capsys.readouterr().out
        assert f"  mirror to {short_path(str(share), 2)}: in sync (1 file, last sync" in out, out
        assert f"; {local} -> {share}\n" in out, out
        shell.run_line_magic("trainwatch", "status")
        assert "mirror" not in capsys.readouterr().out  # closed: no longer listed
    finally:
        shell.run_line_magic("unload_ext", "trainwatch_lab")


def test_the_package_exports_the_fixes_lazily() -> None:
    import trainwatch_lab
    from trainwatch_lab.fix.checkpoint import save as checkpoint
    from trainwatch_lab.fix.mirror import mirror

    assert trainwatch_lab.local_mirror is mirror.local_mirror
    assert trainwatch_lab.save_checkpoint is checkpoint.save_checkpoint
    assert {"local_mirror", "save_checkpoint"} <= set(trainwatch_lab.__all__)
