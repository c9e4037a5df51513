"""A mirror's local disk that fills (fix.mirror.room): a real tensorboardX SummaryWriter logs
through ``local_mirror`` onto a small tmpfs, far more than it holds; the training loop never
meets ENOSPC, the share ends with the newest records, and what was dropped is said."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.mounts import Mounted, SshfsMount, wait_until
from trainwatch_lab.fix.mirror import plan as mp
from trainwatch_lab.fix.mirror import tfrecord
from trainwatch_lab.fix.mirror.mirror import Mirror, local_mirror
from trainwatch_lab.fix.mirror.released import ReleasedLog
from trainwatch_lab.fix.mirror.room import RoomKeeper, pad

TEXT_BYTES = 16 * 1024  # one step's text summary
STEP_S = 0.02  # about 0.8 MiB/s: a few reserves of margin per look of the keeper
MIB = 1024**2
LOOP_LIMIT_S = 240.0  # a loop stuck on a dead tensorboardX writer thread fails, never hangs


class Loop:
    """A training loop on its own thread that logs ``steps`` steps: any exception it met."""

    def __init__(self, writer: Any, steps: range) -> None:
        self.writer, self.steps = writer, steps
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for i in self.steps:
                self.writer.add_scalar("loss", 1.0 / (i + 1), i)
                self.writer.add_text("note", f"step {i} " + "x" * TEXT_BYTES, i)
                if i % 10 == 9:
                    self.writer.flush()  # where tensorboardX raises ENOSPC into the loop
                time.sleep(STEP_S)
        except BaseException as exc:  # the test reports it
            self.error = exc

    def join(self) -> None:
        self.thread.join(LOOP_LIMIT_S)
        assert not self.thread.is_alive(), "the training loop hangs (a dead writer thread?)"
        assert self.error is None, repr(self.error)
        worker = self.writer.file_writer.event_writer._worker
        assert worker is not None and worker.is_alive(), "tensorboardX's writer thread died"


def steps_in(data: bytes) -> tuple[list[int], int]:
    """The steps of the text summaries of an event stream, and its padding records."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    steps, pads = [], 0
    for body in tfrecord.records(data):  # every crc checks: a reader goes to the end
        event = event_pb2.Event()
        event.ParseFromString(body)
        if not event.ListFields():
            pads += 1
        elif event.HasField("summary") and event.summary.value[0].tag.startswith("note"):
            steps.append(event.step)
    return steps, pads


def pads_of(data: bytes) -> list[tuple[int, int]]:
    """``[start, end)`` of each padding record of an event stream."""
    out, pos = [], 0
    for body in tfrecord.records(data):
        end = pos + tfrecord.OVERHEAD + len(body)
        if body.startswith(tfrecord.PAD_TAG):
            out.append((pos, end))
        pos = end
    return out


def free_of(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_bavail * st.f_frsize


def test_pad_keeps_the_size_frees_the_blocks_and_the_stream_reads_on(
    tmpfs_mount: Callable[..., Mounted],
) -> None:
    tbx = pytest.importorskip("tensorboardX")
    root = tmpfs_mount("8m").path
    with tbx.SummaryWriter(str(root)) as writer:
        for i in range(300):
            writer.add_text("note", "x" * 4096, i)
    (path,) = root.glob("*tfevents*")
    data = path.read_bytes()
    with open(path, "rb") as fh:
        starts = list(tfrecord.walk(fh, 0, len(data)))
    before = os.stat(path)
    pad(str(path), starts[10], starts[200])
    after = os.stat(path)
    assert after.st_size == before.st_size
    assert (before.st_blocks - after.st_blocks) * 512 >= starts[200] - starts[10] - 2 * 4096
    steps, pads = steps_in(path.read_bytes())
    assert pads == 1 and steps == list(range(10)) + list(range(200, 300))


def test_the_oldest_records_not_copied_go_first_and_each_run_is_listed(
    tmpfs_mount: Callable[..., Mounted],
) -> None:
    tbx = pytest.importorskip("tensorboardX")
    root = tmpfs_mount("8m").path
    for name in ("old", "new"):
        with tbx.SummaryWriter(str(root / name)) as writer:
            for i in range(200):
                writer.add_text("note", "x" * 8192, i)
        time.sleep(0.01)  # distinct mtimes: "old" is the older file
    (root / "ballast").write_bytes(bytes(free_of(root) - 800 * 1024))  # 0.8 MiB left
    lines: list[str] = []
    keeper = RoomKeeper(str(root), dict, lambda *a: None, reserve=MIB, tell=lines.append)
    keeper.look()  # 1.2 MiB to free: less than the older file (1.6 MiB)
    assert keeper.dropped and all(r.rel.startswith("old/") for r in keeper.dropped)
    assert free_of(root) >= 2 * MIB
    assert len(lines) == 1 and keeper.dropped[0].text() in lines[0], lines
    (old,) = (root / "old").glob("*tfevents*")
    assert pads_of(old.read_bytes()) == [(r.start, r.end) for r in keeper.dropped]
    steps, _ = steps_in(old.read_bytes())
    assert steps[-1] == 199  # the newest records of the older file are kept too
    (new,) = (root / "new").glob("*tfevents*")
    assert steps_in(new.read_bytes()) == (list(range(200)), 0)


def test_a_writer_through_the_mirror_outlives_a_small_local_disk(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """The share answers: records it holds are released locally, none is lost; the share's
    copies are appended to (never recopied whole from padded local bytes)."""
    tbx = pytest.importorskip("tensorboardX")
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    mirror = local_mirror(share, every=0.2, local_root=local_root)
    writer = tbx.SummaryWriter(str(mirror), flush_secs=1)
    try:
        Loop(writer, range(1200)).join()  # about 19 MiB through an 8 MiB disk
        writer.close()
        assert mirror.sync(60), mirror.status()
    finally:
        writer.close()
        mirror.close(10)
    st = mirror.status()
    assert st.bytes_released > 8 * 1024**2 and st.bytes_dropped == 0, st
    (event_file,) = share.glob("*tfevents*")
    assert steps_in(event_file.read_bytes()) == (list(range(1200)), 0)


def test_a_paused_share_and_a_full_local_disk_drop_the_oldest_and_say_so(
    tmpfs_mount: Callable[..., Mounted],
    sshfs_mount: SshfsMount,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tbx = pytest.importorskip("tensorboardX")
    local_root = tmpfs_mount("8m").path
    share = sshfs_mount.path / "runs" / "exp"
    mirror = local_mirror(share, every=0.2, local_root=local_root)
    writer = tbx.SummaryWriter(str(mirror), flush_secs=1)
    caplog.set_level(logging.WARNING, logger="trainwatch_lab.fix.mirror.room")
    started = time.monotonic()
    try:
        Loop(writer, range(100)).join()
        assert mirror.sync(30), mirror.status()
        sshfs_mount.pause()
        Loop(writer, range(100, 1100)).join()  # about 16 MiB while the share sleeps
        during = mirror.status()
        sshfs_mount.resume()
        writer.close()
        # a round that meets records dropped while it copied them copies them again next
        assert wait_until(lambda: mirror.sync(60), 120), mirror.status()
    finally:
        sshfs_mount.resume()
        writer.close()
        mirror.close(10)
    assert during.bytes_dropped > 0 and during.dropped, during
    assert "were dropped, the oldest first" in during.text(), during.text()
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert 1 <= len(lines) <= 1 + (time.monotonic() - started) / 60, lines
    assert during.dropped[0]["file"] in lines[0]
    (event_file,) = share.glob("*tfevents*")
    remote = sshfs_mount.remote / event_file.relative_to(sshfs_mount.mountpoint)
    data = remote.read_bytes()
    steps, pads = steps_in(data)
    # what is missing is exactly what the status lists, the newest steps all arrived
    assert pads_of(data) == [(r["start"], r["end"]) for r in mirror.status().dropped]
    assert steps[:100] == list(range(100)) and steps[-200:] == list(range(900, 1100))
    assert steps == sorted(steps) and len(steps) < 1100 and pads == len(pads_of(data))


def test_released_bytes_are_not_proven_again(tmp_path: Path) -> None:
    """A copy whose local prefix was released (padded) is appended to, not copied whole."""
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100)
    digest = mp._hash_range(str(path), 0, 100)
    copied = mp.Copied(100, os.stat(path).st_ino, -1, ((0, 100, str(digest)),), -1)
    path.write_bytes(b"\0" * 100 + b"more")  # released locally, then the writer appended
    files, _ = mp.scan(str(tmp_path))
    (job,) = mp.plan(str(tmp_path), files, {"f": copied})
    assert not job.append  # the old rule: a mismatch, copied whole
    (job,) = mp.plan(str(tmp_path), files, {"f": dataclasses.replace(copied, released=100)})
    assert job.append and job.offset == 100


REPO = Path(__file__).resolve().parents[3]
NOTE_BYTES = 8192  # one text summary of the restart tests: 300 of them, about 2.5 MiB


def write_notes(path: str | os.PathLike[str], steps: range) -> None:
    tbx = pytest.importorskip("tensorboardX")
    with tbx.SummaryWriter(str(path)) as writer:
        for i in steps:
            writer.add_text("note", f"step {i} " + "x" * NOTE_BYTES, i)


def fill_to_release(local_root: Path) -> None:
    """Leave 1 MiB free on the 8 MiB disk: under twice the reserve (0.8 MiB), the keeper
    releases what the share holds."""
    (local_root / "ballast").write_bytes(bytes(free_of(local_root) - MIB))


def test_a_restarted_mirror_keeps_the_share_copy_of_released_records(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """Regression: a new mirror on the same directories seeded its plan from the local
    files, whose released prefix is padding, and copied that padding over the share's
    records (the file no longer matched: copied whole)."""
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    mirror = local_mirror(share, every=0.2, local_root=local_root)
    try:
        write_notes(mirror, range(300))
        assert mirror.sync(60), mirror.status()
        (event,) = share.glob("*tfevents*")
        original = event.read_bytes()
        fill_to_release(local_root)
        assert wait_until(lambda: mirror.status().bytes_released > MIB, 30), mirror.status()
        assert mirror.sync(60), mirror.status()
    finally:
        mirror.close(10)
    assert (mirror.path / event.name).read_bytes() != original  # padded here
    assert event.read_bytes() == original
    again = local_mirror(share, every=0.2, local_root=local_root)
    try:
        assert again.path == mirror.path
        write_notes(again.path / "more", range(300, 310))  # a new file: copied on
        assert again.sync(60), again.status()
    finally:
        again.close(10)
    assert event.read_bytes() == original, "the share's records were overwritten"
    assert steps_in(original) == (list(range(300)), 0)
    assert len(list(share.rglob("*tfevents*"))) == 2


CHILD = """
import os, pathlib, signal, sys, time
from trainwatch_lab.fix.mirror import room as mirror_room
from trainwatch_lab.fix.mirror.mirror import local_mirror
from tests.fix.mirror.test_room import fill_to_release, write_notes
share, root, original = sys.argv[1:]
mirror = local_mirror(share, every=0.2, local_root=root)
write_notes(mirror, range(300))
assert mirror.sync(60), mirror.status()
(event,) = pathlib.Path(share).glob("*tfevents*")
pathlib.Path(original).write_bytes(event.read_bytes())
punch = mirror_room.punch
def punch_then_die(fd, offset, length):
    punch(fd, offset, length)  # the records' bytes are zeros now, their headers not yet
    os.kill(os.getpid(), signal.SIGKILL)
mirror_room.punch = punch_then_die
fill_to_release(pathlib.Path(root))
time.sleep(60)
"""


def test_a_mirror_killed_in_the_middle_of_a_release_loses_nothing(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """kill -9 between punching a run's blocks and writing its padding header: the local
    file holds zeros where records were; the restarted mirror completes the padding and
    never copies those bytes over the share's records."""
    pytest.importorskip("tensorboardX")
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    original = tmp_path / "original"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-c", CHILD, str(share), str(local_root), str(original)]
    child = subprocess.run(args, env=env, cwd=REPO, timeout=120, capture_output=True)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    (event,) = share.glob("*tfevents*")
    assert event.read_bytes() == original.read_bytes()
    again = local_mirror(share, every=0.2, local_root=local_root)
    try:
        assert again.sync(60), again.status()
    finally:
        again.close(10)
    assert event.read_bytes() == original.read_bytes(), "the share's records were overwritten"
    local = (again.path / event.name).read_bytes()
    assert len(local) == len(original.read_bytes())
    assert steps_in(local)[1] == 1  # the run is one padding record: the local file reads on


def released_mirror(local_root: Path, share: Path) -> tuple[Mirror, Path, bytes]:
    """A mirror whose local event file (300 notes) was copied, then released here: the
    mirror, the share's event file and its bytes."""
    mirror = local_mirror(share, every=0.2, local_root=local_root)
    write_notes(mirror, range(300))
    assert mirror.sync(60), mirror.status()
    (event,) = share.glob("*tfevents*")
    original = event.read_bytes()
    fill_to_release(local_root)
    assert wait_until(lambda: mirror.status().bytes_released > MIB, 30), mirror.status()
    assert mirror.sync(60), mirror.status()
    return mirror, event, original


def released_offset(mirror: Mirror, name: str) -> int:
    return mirror._copied[name].released


def test_a_share_copy_gone_after_release_is_never_written_with_padding(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """The share's copy removed while the mirror runs, and again before a restart: the
    local file's released records are nowhere; its padding is not copied, the status says."""
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    mirror, event, _ = released_mirror(local_root, share)
    try:
        event.unlink()  # the share's copy replaced by a shorter one
        event.write_bytes(b"someone else's")
        os.utime(mirror.path / event.name)  # the mirror looks at the local file again
        assert not mirror.sync(60)
        st = mirror.status()
    finally:
        mirror.close(10)
    assert event.read_bytes() == b"someone else's"
    assert st.state == "error" and "released here once copied" in (st.error or ""), st
    assert event.name in (st.error or "")
    event.unlink()
    again = local_mirror(share, every=0.2, local_root=local_root)
    try:
        assert not again.sync(60)
        st = again.status()
    finally:
        again.close(10)
    assert not event.exists(), "the padding was copied to the share"
    assert "released here once copied" in (st.error or ""), st


def test_a_rewritten_or_cut_file_after_release_reaches_the_share_as_written(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """Regression: the released prefix was never read again, so a file the writer rewrote
    in place (same size) kept the share's old records; one cut short of what was copied
    was copied whole, its padding over the share's records."""
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    mirror, event, original = released_mirror(local_root, share)
    local = mirror.path / event.name
    try:
        released = released_offset(mirror, event.name)
        with open(local, "rb") as fh:
            cut = max(tfrecord.walk(fh, released, len(original) - 1))
        assert released < cut < len(original)
        os.truncate(local, cut)  # the writer cuts its last records
        assert mirror.sync(60), mirror.status()
        assert event.read_bytes() == original[:cut], "the padding went over the records"
        other = tmp_path / "other"
        write_notes(other, range(1000, 1300))  # the same sizes, other steps
        (new,) = other.glob("*tfevents*")
        with open(local, "r+b") as fh:  # rewritten in place: the same inode
            fh.truncate(0)
            fh.write(new.read_bytes())
        assert mirror.sync(60), mirror.status()
        assert event.read_bytes() == new.read_bytes()
        assert event.name not in ReleasedLog(mirror.local).entries
    finally:
        mirror.close(10)
    assert steps_in(event.read_bytes()) == (list(range(1000, 1300)), 0)


def test_only_tfrecord_event_files_are_ever_padded(tmpfs_mount: Callable[..., Mounted]) -> None:
    """A full disk and nothing copied: the keeper drops only records of files it proved to
    be TFRecord event streams; a JSON file, a checkpoint, a "tfevents" name that holds no
    records are left byte for byte."""
    tbx = pytest.importorskip("tensorboardX")
    root = tmpfs_mount("8m").path
    others = {
        "metrics.json": b'{"loss": [' + b"0.5, " * 200_000 + b"1]}",
        "model.ckpt": os.urandom(1_000_000),
        "events.out.tfevents.notes.json": b'{"a": 1}\n' * 100_000,
    }
    for name, data in others.items():
        (root / name).write_bytes(data)
    with tbx.SummaryWriter(str(root / "run")) as writer:
        for i in range(200):
            writer.add_text("note", "x" * 8192, i)
    (root / "ballast").write_bytes(bytes(free_of(root) - 800 * 1024))
    keeper = RoomKeeper(str(root), dict, lambda *a: None, reserve=MIB, tell=lambda _: None)
    keeper.look()
    assert keeper.dropped and all(r.rel.startswith("run/") for r in keeper.dropped)
    for name, data in others.items():
        assert (root / name).read_bytes() == data, name


def test_a_second_mirror_of_the_same_local_directory_is_refused(tmp_path: Path) -> None:
    """Regression: two mirrors of one local directory (to two shares) each released what
    its own share held, records the other had not copied."""
    local = tmp_path / "local"
    first = Mirror(local, tmp_path / "a", every=60)
    try:
        with pytest.raises(ValueError, match="another mirror copies from"):
            Mirror(local, tmp_path / "b", every=60)
    finally:
        first.close(10)
    Mirror(local, tmp_path / "b", every=60).close(10)  # free again once the first closed


def test_a_restart_on_a_full_disk_drops_nothing_before_it_knows_the_share(
    tmpfs_mount: Callable[..., Mounted], sshfs_mount: SshfsMount
) -> None:
    """Regression: a mirror started while the share hangs took every local record for one
    not copied and dropped the oldest, records the share held: the first round then copied
    that padding over them."""
    local_root = tmpfs_mount("8m").path
    share = sshfs_mount.path / "runs" / "exp"
    mirror = local_mirror(share, every=0.2, local_root=local_root)
    try:
        write_notes(mirror, range(300))
        assert mirror.sync(60), mirror.status()
    finally:
        mirror.close(10)
    (event,) = share.glob("*tfevents*")
    remote = sshfs_mount.remote / event.relative_to(sshfs_mount.mountpoint)
    original = remote.read_bytes()
    sshfs_mount.pause()
    try:
        (local_root / "ballast").write_bytes(bytes(free_of(local_root) - 512 * 1024))
        again = local_mirror(share, every=0.2, local_root=local_root)
        try:
            # the keeper looks every 0.25 s: a dozen looks with the disk under its reserve
            assert not wait_until(lambda: again.status().bytes_dropped > 0, 3.0)
            sshfs_mount.resume()
            assert wait_until(lambda: again.sync(60), 120), again.status()
        finally:
            sshfs_mount.resume()
            again.close(10)
    finally:
        sshfs_mount.resume()
    assert remote.read_bytes() == original, "the share's records were overwritten"


def test_the_reserve_is_the_users_to_set(
    tmpfs_mount: Callable[..., Mounted], tmp_path: Path
) -> None:
    """``reserve=`` (bytes) replaces the default (a tenth of this 8 MiB disk): with 3 MiB
    free, under twice a 2 MiB reserve, copied records are released."""
    local_root = tmpfs_mount("8m").path
    share = tmp_path / "share" / "exp"
    for bad in (-1, 1.5, "1G", True):
        with pytest.raises(ValueError, match="reserve must be a number of bytes"):
            local_mirror(share, local_root=local_root, reserve=bad)  # type: ignore[arg-type]
    mirror = local_mirror(share, every=0.2, local_root=local_root, reserve=2 * MIB)
    try:
        write_notes(mirror, range(300))
        assert mirror.sync(60), mirror.status()
        (local_root / "ballast").write_bytes(bytes(free_of(local_root) - 3 * MIB))
        assert wait_until(lambda: mirror.status().bytes_released > MIB, 30), mirror.status()
    finally:
        mirror.close(10)


def test_an_event_file_with_another_name_elsewhere_is_never_padded(
    tmpfs_mount: Callable[..., Mounted],
) -> None:
    """Regression: a hard link into the log directory (an event file of another run, kept
    elsewhere under its own name) was padded: that other name lost its records too."""
    root = tmpfs_mount("8m").path
    write_notes(root / "elsewhere", range(200))
    (theirs,) = (root / "elsewhere").glob("*tfevents*")
    data = theirs.read_bytes()
    (root / "logs").mkdir()
    os.link(theirs, root / "logs" / theirs.name)
    write_notes(root / "logs" / "run", range(200))
    (root / "ballast").write_bytes(bytes(free_of(root) - 800 * 1024))
    keeper = RoomKeeper(str(root / "logs"), dict, lambda *a: None, reserve=MIB, tell=str)
    keeper.look()
    assert keeper.dropped and all(r.rel.startswith("run/") for r in keeper.dropped)
    assert theirs.read_bytes() == data


def test_a_mirror_started_while_the_share_hangs_drops_what_it_made_since(
    tmpfs_mount: Callable[..., Mounted], sshfs_mount: SshfsMount
) -> None:
    """The share never answered since the start: a file written since then is none the
    share can hold, so its oldest records may go; the writer never meets ENOSPC."""
    tbx = pytest.importorskip("tensorboardX")
    local_root = tmpfs_mount("8m").path
    share = sshfs_mount.path / "runs" / "exp"
    sshfs_mount.pause()
    try:
        mirror = local_mirror(share, every=0.2, local_root=local_root)
        writer = tbx.SummaryWriter(str(mirror), flush_secs=1)
        try:
            Loop(writer, range(700)).join()  # about 11 MiB through an 8 MiB disk
            st = mirror.status()
        finally:
            writer.close()
            mirror.close(1)
    finally:
        sshfs_mount.resume()
    assert st.bytes_dropped > 0 and st.state == "share-unresponsive", st
