"""fix.mirror.files: the live mirrors of this machine, from the status files real mirrors
publish (what the Jupyter server's panel lists); stale and closed ones left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from trainwatch_lab.fix.mirror.files import MirrorFiles, read_published, status_files
from trainwatch_lab.fix.mirror.mirror import STATUS_FILE, local_mirror
from trainwatch_lab.fix.scratch import base_name


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_running_mirror_is_listed_with_its_words_and_a_closed_one_is_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "scratch"
    files = MirrorFiles(roots=[str(root)])
    assert files.look() == []  # no mirror directory at all yet
    with local_mirror(tmp_path / "share" / "exp1", every=60, local_root=root) as m:
        (m / "events.out.tfevents.1").write_bytes(b"x" * 10)
        assert m.sync(10)
        (published,) = files.look()
        assert published.pid == os.getpid() and published.every == 60
        assert published.status.local == m.local and published.status.state == "in-sync"
        data = published.to_json()
        assert data["text"] == m.status().text()  # Python's words, as %trainwatch status
        assert data["pid"] == os.getpid() and data["bytes_copied"] == 10
    assert files.look() == []  # closed: its last status says so


def test_pending_bytes_keep_their_lag_growing_and_a_dead_owner_is_stale(tmp_path: Path) -> None:
    local = tmp_path / "scratch" / base_name() / "exp1-abc"
    local.mkdir(parents=True)
    path = local / STATUS_FILE
    status = {
        "local": str(local), "share": "/mnt/share/exp1", "state": "share-unresponsive",
        "last_sync": None, "lag_s": 5.0, "bytes_pending": 2048, "bytes_copied": 0, "files": 1,
        "error": "statvfs did not answer in 2 s", "pid": os.getpid(), "every": 30.0,
    }  # fmt: skip
    path.write_text(json.dumps(status))
    written = path.stat().st_mtime
    got = read_published(str(path), now=written + 20)
    assert got is not None and got.status.lag_s == 25.0  # still behind since it was written
    assert "share not answering" in got.to_json()["text"]
    path.write_text(json.dumps({**status, "pid": dead_pid()}))
    assert read_published(str(path)) is None
    assert MirrorFiles(roots=[str(tmp_path / "scratch")]).look() == []


def test_junk_is_ignored_and_the_listing_is_bounded(tmp_path: Path) -> None:
    base = tmp_path / base_name()
    for i, text in enumerate(["{not json", json.dumps([1, 2]), json.dumps({"pid": 1})]):
        (base / f"d{i}").mkdir(parents=True)
        (base / f"d{i}" / STATUS_FILE).write_text(text)
        assert read_published(str(base / f"d{i}" / STATUS_FILE)) is None
    (base / "stray-file").write_text("")
    assert len(status_files([str(tmp_path)])) == 3
    assert len(status_files([str(tmp_path)], limit=2)) == 2
    (base / "d0" / STATUS_FILE).write_bytes(b" " * (65 * 1024))
    assert read_published(str(base / "d0" / STATUS_FILE)) is None


def test_roots_are_judged_again_only_after_a_minute(tmp_path: Path) -> None:
    now = [0.0]
    files = MirrorFiles(roots=[str(tmp_path)], clock=lambda: now[0])
    assert files.roots() == [str(tmp_path)]
    files._given = [str(tmp_path / "other")]
    now[0] = 59.0
    assert files.roots() == [str(tmp_path)]
    now[0] = 60.0
    assert files.roots() == [str(tmp_path / "other")]


def test_a_root_on_a_dead_share_holds_no_caller(sshfs_mount, tmp_path: Path) -> None:
    """A scratch root that is a symlink onto a share (``~/.cache`` -> NFS on a cluster) passes
    the mount-table judgement; when the share stops answering, the listing hangs on its own
    thread and the caller (the server's sampler, every tick) gets the last answer in time."""
    # made on the server's side: sshfs has nothing cached, its first lookup goes to the server
    (Path(sshfs_mount.remote) / base_name()).mkdir(exist_ok=True)
    root = tmp_path / "cache"
    root.symlink_to(sshfs_mount.path)
    live = tmp_path / "scratch"
    files = MirrorFiles(roots=[str(live), str(root)])
    with local_mirror(tmp_path / "share" / "exp1", every=60, local_root=live) as m:
        (m / "events").write_bytes(b"x")
        assert m.sync(10)
        (before,) = MirrorFiles(roots=[str(live)]).look()
        sshfs_mount.pause()
        try:
            first = files.look(wait=0.5)  # this listing hangs in the share: not waited out
            again = files.look(wait=5.0)  # still stuck: no second listing, no wait at all
            stuck = files._lanes[str(root)]._busy
        finally:
            sshfs_mount.resume()
        assert [p.status.local for p in first] == [before.status.local]  # the live root
        assert [p.status.local for p in again] == [before.status.local]
        assert stuck  # the listing really was held by the dead share


def mirror_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trainwatch-mirrors"]


def test_a_roots_lister_is_kept_between_looks_and_every_look_lists_afresh(
    tmp_path: Path,
) -> None:
    """Issue 33: one thread per root lives between looks instead of one started per root
    every tick; each look still lists again, so a mirror that starts or ends in between is
    seen by the next look, and the threads end when closed or idle."""
    root = tmp_path / "scratch"
    files = MirrorFiles(roots=[str(root), str(tmp_path / "other")], idle_s=60.0)
    before = set(mirror_threads())
    assert files.look() == []
    lanes = set(mirror_threads()) - before
    assert len(lanes) == 2
    with local_mirror(tmp_path / "share" / "exp1", every=60, local_root=root) as m:
        (m / "events").write_bytes(b"x")
        assert m.sync(10)
        (published,) = files.look()  # the same threads listed it
        assert published.status.local == m.local
        assert set(mirror_threads()) - before == lanes
    assert files.look() == []  # closed in between: the next look says so
    assert set(mirror_threads()) - before == lanes
    files.close()
    deadline = time.monotonic() + 5
    while set(mirror_threads()) & lanes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(mirror_threads()) & lanes

    idle = MirrorFiles(roots=[str(root)], idle_s=0.05)
    assert idle.look() == []
    deadline = time.monotonic() + 5
    while set(mirror_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(mirror_threads()) - before  # idle: ended by itself
    assert idle.look() == []  # and the next look starts another
    idle.close()


def test_a_stuck_listing_is_waited_for_once_and_then_not_at_all(tmp_path: Path) -> None:
    """The lister kept between looks keeps the old rule: a listing that hangs holds its own
    thread, the look that asked waits ``wait`` at most, the next ones not at all and ask no
    second listing; once it returns, the root is listed again."""
    files = MirrorFiles(roots=[str(tmp_path)], idle_s=60.0)
    release = threading.Event()
    calls: list[str] = []

    def hang(root: str) -> None:
        calls.append(root)
        release.wait(10)

    files._refresh = hang  # type: ignore[method-assign]
    t0 = time.monotonic()
    assert files.look(wait=0.2) == []
    t1 = time.monotonic()
    assert files.look(wait=5.0) == []
    t2 = time.monotonic()
    assert 0.15 <= t1 - t0 < 3.0 and t2 - t1 < 1.0
    assert calls == [str(tmp_path)]
    release.set()
    deadline = time.monotonic() + 5
    while files._lanes[str(tmp_path)]._busy and time.monotonic() < deadline:
        time.sleep(0.01)
    files.look(wait=5.0)
    assert calls == [str(tmp_path)] * 2
    files.close()
