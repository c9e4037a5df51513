"""The mirror never reports success while the share holds something else (issue 25): against
a real sshfs share, files changed in every way a training script changes them, a copy that
vanished or was zero-filled, links planted on the share, a second mirror, and SIGTERM or a
plain exit with files still open, in real child processes."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.mounts import SshfsMount, wait_until
from trainwatch_lab.core.guard.guard import MountGuard
from trainwatch_lab.fix.mirror import plan as mp
from trainwatch_lab.fix.mirror.lock import ShareInUse
from trainwatch_lab.fix.mirror.mirror import Mirror, local_mirror
from trainwatch_lab.fix.mirror.plan import SHARE_LOCK

REPO = Path(__file__).resolve().parents[3]


def remote(mount: SshfsMount, share: Path) -> Path:
    """The share directory seen on the server's side (what another host would read)."""
    return mount.remote / share.relative_to(mount.mountpoint)


def visible(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_a_header_rewritten_in_place_while_the_file_grows_reaches_the_share(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """Finding 1: a change before the old end (a record count in the header, an ``r+``
    rewrite) followed by appends; the old mirror compared only the last 4 KiB."""
    share = sshfs_mount.path / "f1"
    local = tmp_path / "local"
    local.mkdir()
    log = local / "records.txt"
    with Mirror(local, share, every=60) as m:
        log.write_bytes(b"records: 000001\n" + b"".join(b"row %05d\n" % i for i in range(600)))
        assert m.sync(15)
        with open(log, "r+b") as fh:  # the header counts the records: rewritten in place
            fh.write(b"records: 000005")
            fh.seek(0, os.SEEK_END)
            fh.write(b"".join(b"row %05d\n" % i for i in range(600, 1200)))
        assert m.sync(15)
        assert (remote(sshfs_mount, share) / "records.txt").read_bytes() == log.read_bytes()
        for _ in range(3):  # an r+ rewrite of the middle while the file grows
            with open(log, "r+b") as fh:
                fh.seek(5000)
                fh.write(os.urandom(8).hex().encode())
                fh.seek(0, os.SEEK_END)
                fh.write(os.urandom(3000).hex().encode())
            assert m.sync(15)
            assert (remote(sshfs_mount, share) / "records.txt").read_bytes() == log.read_bytes()


def test_a_sqlite_database_is_copied_whole(sshfs_mount: SshfsMount, tmp_path: Path) -> None:
    """Finding 1: SQLite rewrites pages in place as it grows; the share must hold every row."""
    share = sshfs_mount.path / "db"
    local = tmp_path / "local"
    local.mkdir()
    m = Mirror(local, share, every=60)
    db = sqlite3.connect(local / "metrics.db")
    db.execute("create table t (i integer, blob blob)")
    db.execute("insert into t values (0, ?)", (os.urandom(3000),))
    db.commit()
    assert m.sync(15)
    for i in range(1, 8):
        db.execute("insert into t values (?, ?)", (i, os.urandom(3000)))
        db.commit()
        assert m.sync(15)  # each round sees the file grown, its header page rewritten
    db.close()
    assert m.close(15)
    copy = sqlite3.connect(remote(sshfs_mount, share) / "metrics.db")
    try:
        assert copy.execute("pragma integrity_check").fetchone() == ("ok",)
        assert copy.execute("select count(*) from t").fetchone() == (8,)
    finally:
        copy.close()


def test_a_vanished_share_copy_is_copied_whole_never_zero_filled(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """Finding 2: the share's copy deleted while the log grows must not come back sparse
    (an append never creates a file), and a restarted mirror must not trust a zero-filled
    copy that merely has the right size and time."""
    share = sshfs_mount.path / "f2"
    server = remote(sshfs_mount, share)
    local = tmp_path / "local"
    local.mkdir()
    log = local / "train.log"
    with Mirror(local, share, every=60) as m:
        log.write_bytes(os.urandom(2000))
        assert m.sync(15)
        (server / "train.log").unlink()  # someone cleaned the share
        with open(log, "ab") as fh:
            fh.write(os.urandom(750))
        assert m.sync(15)
        assert (server / "train.log").read_bytes() == log.read_bytes()
    st = log.stat()
    (server / "train.log").write_bytes(bytes(st.st_size))  # same size and time, all zeros
    os.utime(server / "train.log", ns=(st.st_mtime_ns, st.st_mtime_ns))
    with Mirror(local, share, every=60) as m:
        assert m.sync(15)
    assert (server / "train.log").read_bytes() == log.read_bytes()


def test_links_planted_on_the_share_are_never_followed(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """Finding 8: a link at the old predictable temporary name, or at the final name
    before an append, must not make the mirror write outside the share."""
    share = sshfs_mount.path / "f8"
    server = remote(sshfs_mount, share)
    share.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours")
    local = tmp_path / "local"
    local.mkdir()
    import hashlib

    old_tmp = f"{mp.TMP_PREFIX}{hashlib.sha1(b'metrics.csv').hexdigest()[:16]}.tmp"
    (share / old_tmp).symlink_to(outside)  # planted through the mount: its cache knows
    with Mirror(local, share, every=60) as m:
        (local / "metrics.csv").write_bytes(b"step,loss\n1,0.5\n")
        assert m.sync(15)
        assert outside.read_bytes() == b"not yours"
        (share / "metrics.csv").unlink()
        (share / "metrics.csv").symlink_to(outside)  # planted where the next append goes
        with open(local / "metrics.csv", "ab") as fh:
            fh.write(b"2,0.4\n")
        assert m.sync(15)
    assert outside.read_bytes() == b"not yours"
    assert not (server / "metrics.csv").is_symlink()
    assert (server / "metrics.csv").read_bytes() == (local / "metrics.csv").read_bytes()


HOLDER = textwrap.dedent(
    """
    import sys
    from trainwatch_lab.fix.mirror.mirror import local_mirror

    m = local_mirror(sys.argv[1], every=0.2, local_root=sys.argv[2])
    (m.path / "metrics.csv").write_text("first writer\\n")
    assert m.sync(15)
    print("holding", flush=True)
    sys.stdin.readline()
    m.close(10)
    """
)


def test_a_second_mirror_onto_the_same_share_is_refused(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """Finding 7: another process mirroring into the share directory holds its lock; a
    second mirror (here, or the CLI) is refused with who holds it, and writes nothing."""
    share = sshfs_mount.path / "f7"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(share), str(tmp_path / "a")],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "holding"
        with pytest.raises(ShareInUse, match=rf"process {proc.pid} on .*close it first"):
            local_mirror(share, every=0.2, local_root=tmp_path / "b")
        local = tmp_path / "cli"
        local.mkdir()
        (local / "metrics.csv").write_text("second writer\n")
        cli = subprocess.run(
            [sys.executable, "-m", "trainwatch_lab", "mirror", "--once", str(local), str(share)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 2 and "another mirror copies into" in cli.stderr, cli.stderr
        assert len(cli.stderr.strip().splitlines()) == 1, cli.stderr
        assert (remote(sshfs_mount, share) / "metrics.csv").read_text() == "first writer\n"
        proc.stdin.write("done\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with local_mirror(share, every=0.2, local_root=tmp_path / "b") as m:  # released: ours now
        (m.path / "metrics.csv").write_text("next run\n")
        assert m.sync(15)


LEAVER = textwrap.dedent(
    """
    import csv, signal, sys, threading
    from trainwatch_lab.fix.mirror.mirror import local_mirror

    stopping = threading.Event()
    if sys.argv[3].startswith("own-handler"):
        def own(signum, frame):
            open(sys.argv[2] + "/own-handler-ran", "w").close()
            if sys.argv[3] == "own-handler":
                sys.exit(3)
            stopping.set()  # like Lightning: save last.ckpt, then exit normally
        signal.signal(signal.SIGTERM, own)
    m = local_mirror(sys.argv[1], every=30, local_root=sys.argv[2])
    (m.path / "a.log").write_text("written before the end")
    notes = open(m.path / "notes.txt", "w")  # never closed: the interpreter flushes it
    notes.write("left open")
    rows = csv.writer(open(m.path / "rows.csv", "w", newline=""))
    rows.writerow(["step", "loss"])
    print("ready", flush=True)
    if sys.argv[3] != "exit":
        sys.stdin.readline()  # SIGTERM arrives here
    if sys.argv[3] == "own-handler-goes-on":
        while not stopping.wait(0.05):
            pass
        (m.path / "last.ckpt").write_bytes(b"saved after SIGTERM")
    """
)


@pytest.mark.parametrize("how", ["exit", "sigterm", "own-handler", "own-handler-goes-on"])
def test_everything_written_reaches_the_share_at_exit_and_on_sigterm(
    sshfs_mount: SshfsMount, tmp_path: Path, how: str
) -> None:
    """Finding 5: after SIGTERM (the default, or the program's own handler, which still
    runs) and after a plain exit, the share holds every file, the unclosed ones too.
    Review 2: a handler that lets the program go on (it saves last.ckpt after SIGTERM,
    then exits normally) finds the mirror still running: that file reaches the share."""
    share = sshfs_mount.path / f"f5-{how}"
    proc = subprocess.Popen(
        [sys.executable, "-c", LEAVER, str(share), str(tmp_path), how],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        if how != "exit":
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    expected = {"sigterm": 128 + signal.SIGTERM, "own-handler": 3}.get(how, 0)
    assert proc.returncode == expected, err
    assert (tmp_path / "own-handler-ran").exists() == how.startswith("own-handler")
    last = {"last.ckpt": b"saved after SIGTERM"} if how == "own-handler-goes-on" else {}
    assert visible(remote(sshfs_mount, share)) == {
        "a.log": b"written before the end",
        "notes.txt": b"left open",
        "rows.csv": b"step,loss\r\n",
        **last,
    }


def test_a_whole_copy_is_fsynced_and_renamed_and_leaves_no_temporary(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """A killed copy's temporary goes when the next mirror of the share starts (it holds
    the share's lock, so no other mirror's temporary can be there)."""
    share = sshfs_mount.path / "tmp"
    server = remote(sshfs_mount, share)
    server.mkdir(parents=True)
    (server / f"{mp.TMP_PREFIX}0123456789abcdef.tmp").write_bytes(b"half a copy")
    local = tmp_path / "local"
    local.mkdir()
    (local / "a.log").write_bytes(b"x" * 10)
    with Mirror(local, share, every=60) as m:
        assert m.sync(15)
        assert wait_until(lambda: not list(server.glob(f"{mp.TMP_PREFIX}*")), 5)
    assert visible(server) == {"a.log": b"x" * 10}


def test_a_helper_killed_before_its_rename_leaves_the_share_copy_whole(
    sshfs_mount: SshfsMount, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL at an injected point: the guard's helper dies after writing a whole copy's
    temporary, before renaming it over the share's copy. The share keeps the old copy whole,
    the next round lands the new one, and the next mirror of the share removes the leftover."""
    fired = tmp_path / "fired"
    fired.touch()  # armed below, after the first copy
    monkeypatch.setenv("TRAINWATCH_CRASH_AT", f"mirror-before-rename@{fired}")
    share = sshfs_mount.path / "killed"
    server = remote(sshfs_mount, share)
    local = tmp_path / "local"
    local.mkdir()
    state = local / "state.json"
    guard = MountGuard()  # its helpers see the variable
    try:
        with Mirror(local, share, every=60, guard=guard) as m:
            state.write_bytes(b'{"step": 1}' + b" " * 500)
            assert m.sync(15)
            fired.unlink()
            state.write_bytes(b'{"step": 2}' + b" " * 500)
            assert not m.sync(15)  # the helper died mid-round: not in sync, and says so
            assert fired.exists() and "error" in m.status().state
            assert (server / "state.json").read_bytes() == b'{"step": 1}' + b" " * 500
            assert list(server.glob(f"{mp.TMP_PREFIX}*.tmp"))  # the killed copy's temporary
            assert m.sync(15)
            assert (server / "state.json").read_bytes() == state.read_bytes()
            assert not list(server.glob(f"{mp.TMP_PREFIX}*"))  # the next round removed it
        with Mirror(local, share, every=60, guard=guard) as m:
            assert m.sync(15)
        assert not list(server.glob(f"{mp.TMP_PREFIX}*"))
    finally:
        guard.close()


def test_a_copy_that_fills_the_share_leaves_no_temporary_and_the_share_recovers(
    tmpfs_mount, tmp_path: Path
) -> None:
    """Review 1: a whole copy that runs out of room (ENOSPC halfway) removes its temporary,
    every retry too, so the share is not kept full: once the file fits, it lands."""
    server = tmpfs_mount("2m").path
    share = server / "runs"
    local = tmp_path / "local"
    local.mkdir()
    big = local / "model.bin"
    big.write_bytes(os.urandom(6 * 1024 * 1024))
    with Mirror(local, share, every=60) as m:
        for _ in range(3):
            assert not m.sync(30)
            st = m.status()
            assert st.state == "error" and "No space left" in (st.error or ""), st
            assert not list(share.glob(f"{mp.TMP_PREFIX}*")), "a half copy stayed on the share"
        big.write_bytes(b"fits now" * 1000)
        assert m.sync(30), m.status()
    assert visible(share) == {"model.bin": b"fits now" * 1000}


def test_a_save_bound_for_a_share_is_written_on_local_disk_first(
    sshfs_mount: SshfsMount,
) -> None:
    """The process that trains never writes the share itself (a hung share would hold it in
    the kernel): ``save`` gets a local path, the helper copies the result over."""
    from trainwatch_lab.fix.checkpoint.save import save_checkpoint

    share = sshfs_mount.path / "staged"
    given: list[str] = []

    def save(path: str) -> None:
        given.append(path)
        Path(path).write_bytes(b"w" * 5000)

    save_checkpoint(save, share / "model.pt")
    assert not given[0].startswith(str(sshfs_mount.mountpoint)), given
    assert not Path(given[0]).exists() and not Path(given[0]).parent.exists()  # cleaned up
    assert (remote(sshfs_mount, share) / "model.pt").read_bytes() == b"w" * 5000


def test_a_lock_left_by_a_close_on_a_hung_share_does_not_lock_this_process_out(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """A mirror closed while the share hung could not remove its lock; a new mirror of the
    same process (a notebook cell run again) takes it over, an open one still refuses."""
    share = sshfs_mount.path / "relock"
    first = Mirror(tmp_path / "a", share, every=60)
    (tmp_path / "a" / "x.log").write_text("x")
    assert first.sync(15)
    sshfs_mount.pause()
    try:
        (tmp_path / "a" / "x.log").write_text("xy")
        assert not first.close(timeout=1.0)
    finally:
        sshfs_mount.resume()
    assert (remote(sshfs_mount, share) / SHARE_LOCK).exists()  # left behind
    with Mirror(tmp_path / "b", share, every=60) as second:
        # a round claims the share once the guard's call stuck in the pause has returned
        assert wait_until(lambda: second.sync(15), 30), second.status()
        with pytest.raises(ShareInUse):
            Mirror(tmp_path / "c", share, every=60)


def _rchar() -> int:
    """Bytes this process (every thread: the mirror's too) has read so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _digest(path: Path) -> str:
    h = hashlib.blake2b()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _big_sparse_log(local: Path) -> Path:
    """64 MiB, mostly holes: a head, a block of data in the middle, and a tail."""
    log = local / "events.out.tfevents.big"
    with open(log, "wb") as fh:
        fh.write(os.urandom(1 << 20))
        fh.seek(40 << 20)
        fh.write(os.urandom(1 << 20))
        fh.truncate((64 << 20) - 100_000)
        fh.seek(0, os.SEEK_END)
        fh.write(os.urandom(100_000))
    return log


def test_a_sparse_log_stays_sparse_on_the_share(sshfs_mount: SshfsMount, tmp_path: Path) -> None:
    """Issue 34 item 12: a sparse source became real blocks on the share (4.5 GiB)."""
    share = sshfs_mount.path / "sparse"
    local = tmp_path / "local"
    local.mkdir()
    log = _big_sparse_log(local)
    with Mirror(local, share, every=60) as m:
        assert m.sync(60)
        copy = remote(sshfs_mount, share) / log.name
        assert os.stat(copy).st_blocks * 512 < 8 << 20  # 2.1 MiB of data, not 64 MiB
        with open(log, "ab") as fh:  # a hole appended, then data
            fh.truncate(80 << 20)
            fh.seek(0, os.SEEK_END)
            fh.write(b"after the hole")
        assert m.sync(60)
        assert os.stat(copy).st_blocks * 512 < 8 << 20
        assert _digest(copy) == _digest(log)


def test_a_big_log_is_appended_to_without_reading_it_again(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    """Issue 34 item 12: each round hashed the whole file again before an append (a 4.5 GiB
    log with 1 KiB per 5 s: 40.6 s of CPU per minute), and a restart hashed it whole on both
    sides. Bytes read by this process (the mirror's thread) are counted in /proc/self/io."""
    share = sshfs_mount.path / "big"
    server = remote(sshfs_mount, share)
    local = tmp_path / "local"
    local.mkdir()
    log = _big_sparse_log(local)
    with Mirror(local, share, every=60) as m:
        assert m.sync(60)
        read = []
        for _ in range(3):
            with open(log, "ab") as fh:
                fh.write(os.urandom(1024))
            before = _rchar()
            assert m.sync(30)
            read.append(_rchar() - before)
        # the first append proves the head and tail chunks of the whole copy (4 MiB each),
        # the next ones the head and tail zones (1 MiB each) and what was appended
        assert read[0] < 10 << 20 and max(read[1:]) < 3 << 20, read
        with open(log, "r+b") as fh:  # a header rewritten in place is still seen
            fh.write(b"header v2")
            fh.seek(0, os.SEEK_END)
            fh.write(os.urandom(1024))
        assert m.sync(30)
        assert _digest(server / log.name) == _digest(log)
    before = _rchar()
    with Mirror(local, share, every=60) as again:  # a restart proves head and tail only
        assert again.sync(60) and again.status().bytes_copied == 0
    assert _rchar() - before < 8 << 20, "a restart read the whole file"
