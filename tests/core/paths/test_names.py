"""core.paths.names on real filesystems: local disk, tmpfs, loop ext4, read-only, sshfs, dead sshfs.

These also exercise the fixtures of tests/support/mounts.py that the other test modules use.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.env import need, need_root
from tests.support.mounts import guard_helpers, run, unmount, wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.guard.guard import MountGuard, MountUnresponsive
from trainwatch_lab.core.model import CheckpointInfo, PathState, Sample
from trainwatch_lab.core.paths import look as path_look
from trainwatch_lab.core.paths import names as paths_mod
from trainwatch_lab.core.paths import watch as path_watch
from trainwatch_lab.core.paths.look import inspect_path
from trainwatch_lab.core.paths.names import normalise, short_path
from trainwatch_lab.core.paths.source import PathsSource
from trainwatch_lab.core.storage.blockdev import block_device_for
from trainwatch_lab.core.storage.mounts import mount_for_path, read_mounts
from trainwatch_lab.core.storage.probe import LEFTOVER, READ_ONLY

FAST = replace(DEFAULTS, mount_timeout_s=1.0, probe_writes=8, probe_budget_s=1.0)


@pytest.fixture
def guard() -> Iterator[MountGuard]:
    g = MountGuard(FAST.mount_timeout_s)
    yield g
    g.close()


def probe_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if LEFTOVER.match(n)]


def collect(source: PathsSource) -> Sample:
    sample = Sample(t=time.time())
    source.collect(sample)
    return sample


# -- inspect_path ---------------------------------------------------------------------------


def test_local_directory(tmp_path: Path, guard: MountGuard) -> None:
    state = inspect_path(str(tmp_path), FAST, guard=guard)
    mounts = read_mounts()
    entry = mount_for_path(str(tmp_path), mounts)
    st = os.statvfs(tmp_path)
    assert state.path == str(tmp_path)
    assert state.exists and state.responsive and state.error is None
    assert state.mountpoint == entry.mountpoint and state.fstype == entry.fstype
    assert state.device == block_device_for(entry, mounts=mounts)
    assert state.total_bytes == st.f_blocks * st.f_frsize
    assert state.inodes_total == st.f_files
    assert state.probe is not None and state.probe.error is None
    assert state.probe.samples == FAST.probe_writes
    assert probe_files(tmp_path) == []


def test_path_not_created_yet_resolves_through_its_ancestor(
    tmp_path: Path, guard: MountGuard
) -> None:
    logdir = tmp_path / "exp1"  # about to be created in an existing directory: probed there
    state = inspect_path(str(logdir), FAST, guard=guard)
    assert not state.exists
    assert state.responsive and state.total_bytes and state.error is None
    assert state.probe is not None and state.probe.samples == FAST.probe_writes
    assert (state.checked_at, state.file_type) == (str(tmp_path), None)
    assert state.note == f"not created yet; checked at {tmp_path}"
    deeper = inspect_path(str(tmp_path / "runs" / "exp1"), FAST, guard=guard)
    assert not deeper.exists and deeper.responsive and deeper.total_bytes
    # the nearest existing ancestor, however far: the filesystem the run will write to
    assert deeper.probe is not None and deeper.probe.samples == FAST.probe_writes
    assert deeper.note == f"not created yet; checked at {tmp_path}"
    assert deeper.checkpoints is None  # the ancestor's checkpoints are not the user's
    assert os.listdir(tmp_path) == []  # neither the logdir nor a probe file was created


def test_a_path_behind_a_file_can_never_be_created(tmp_path: Path, guard: MountGuard) -> None:
    (tmp_path / "notes.txt").write_text("x")
    state = inspect_path(str(tmp_path / "notes.txt" / "runs"), FAST, guard=guard)
    assert not state.exists and state.checked_at is None and state.probe is None
    assert state.error == f"cannot exist: {tmp_path / 'notes.txt'} is a file, not a directory"
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_new_logdir_under_a_directory_with_checkpoints_is_not_scanned(
    tmp_path: Path, guard: MountGuard
) -> None:
    (tmp_path / "epoch=0.ckpt").write_bytes(b"w" * 1000)
    state = inspect_path(str(tmp_path / "run2"), FAST, probe=False, guard=guard)
    assert state.checkpoints is None and state.note is not None


NOT_STORAGE = {  # path -> (file type, what the note says it is)
    "/dev/null": ("character device", "a character device on devtmpfs"),
    "/dev": ("directory", "a directory on devtmpfs"),
    "/proc/self": ("directory", "a directory on proc"),
    "/sys/kernel": ("directory", "a directory on sysfs"),
}


@pytest.mark.parametrize("path", sorted(NOT_STORAGE))
def test_kernel_filesystems_and_devices_are_not_storage(path: str, guard: MountGuard) -> None:
    if mount_for_path(path, read_mounts()).fstype not in ("devtmpfs", "proc", "sysfs"):
        pytest.skip(f"{path} is no kernel filesystem here")  # a container's /dev: tmpfs
    before = os.stat("/dev").st_mtime_ns
    state = inspect_path(path, FAST, guard=guard)
    file_type, what = NOT_STORAGE[path]
    assert state.exists and state.responsive and state.kind == "pseudo"
    assert state.file_type == file_type and state.checked_at == path
    assert state.note == f"{what} (a kernel pseudo-filesystem): not storage, nothing written"
    assert state.probe is None and state.checkpoints is None
    assert os.stat("/dev").st_mtime_ns == before  # nothing created (nor removed) in /dev


def test_a_fifo_is_not_storage_and_never_opened(tmp_path: Path, guard: MountGuard) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    state = inspect_path(str(fifo), FAST, guard=guard)  # an open() would block: no writer
    assert state.exists and state.file_type == "FIFO" and state.kind != "pseudo"
    assert state.note == "a FIFO: not storage, nothing written" and state.probe is None
    assert os.listdir(tmp_path) == ["pipe"]


def judged(key: str, fstype: str = "ext4", **raw: object) -> paths_mod.Judgement:
    answer = {"exists": True, "target": key, "is_dir": True, "file_type": "directory"}
    answer.update(raw)
    return paths_mod.judge(key, answer, fstype)


def test_judge_is_the_one_rule() -> None:
    """Every surface (check, the notebook, the panel, watch) asks this one function."""
    ok = judged("/data/logs")
    assert (ok.exists, ok.checked_at, ok.note, ok.refusal) == (True, "/data/logs", None, None)
    later = judged("/mnt/share/runs/exp1", "nfs4", exists=False, target="/mnt/share/runs")
    assert later.note == "not created yet; checked at /mnt/share/runs"
    assert later.refusal is None and later.file_type is None
    blocked = judged(
        "/etc/passwd/x", exists=False, target="/etc/passwd", is_dir=False, file_type="file"
    )
    assert blocked.checked_at is None and blocked.note is None
    assert blocked.refusal == "/etc/passwd/x cannot exist: /etc/passwd is a file, not a directory"
    fifo = judged("/tmp/p", "tmpfs", is_dir=False, file_type="FIFO")
    assert fifo.note == "a FIFO: not storage, nothing written"
    assert fifo.refusal == "/tmp/p is not storage: a FIFO"
    log_file = judged("/tmp/events.out", is_dir=False, file_type="file")
    assert log_file.note is None and log_file.refusal is None  # a log file: fine
    new_in_dev = judged("/dev/x", "devtmpfs", exists=False, target="/dev")
    assert new_in_dev.note == (
        "not created yet; checked at /dev; a path on devtmpfs (a kernel pseudo-filesystem): "
        "not storage, nothing written"
    )
    assert new_in_dev.refusal == (
        "/dev/x is not storage: a path on devtmpfs (a kernel pseudo-filesystem)"
    )


def test_printable_escapes_what_would_break_a_line() -> None:
    assert paths_mod.printable("/data/logs run 1/é") == "/data/logs run 1/é"
    assert paths_mod.printable("/tmp/a\nb\tc\rd") == "/tmp/a\\nb\\tc\\rd"
    assert paths_mod.printable("/tmp/\x1b[31mred") == "/tmp/\\x1b[31mred"
    assert paths_mod.printable("a\\n") == "a\\\\n"  # a backslash stays tellable from \n
    undecodable = b"/tmp/\xff".decode("utf-8", "surrogateescape")
    assert paths_mod.printable(undecodable) == "/tmp/\\xff"
    assert paths_mod.printable("zero\u200bwidth") == "zero\\u200bwidth"


def test_relative_and_home_paths_are_normalised(guard: MountGuard) -> None:
    assert inspect_path(".", FAST, probe=False, guard=guard).path == os.getcwd()
    assert normalise("~/a/../b") == os.path.join(os.path.expanduser("~"), "b")


def test_checkpoints_are_found(tmp_path: Path, guard: MountGuard) -> None:
    for i, name in enumerate(["epoch=0.ckpt", "epoch=1.ckpt", "notes.txt"]):
        (tmp_path / name).write_bytes(b"w" * (1000 * (i + 1)))
        os.utime(tmp_path / name, (1_000_000 + 600 * i, 1_000_000 + 600 * i))
    state = inspect_path(str(tmp_path), FAST, probe=False, guard=guard)
    assert state.checkpoints is not None
    assert state.checkpoints.count == 2
    assert state.checkpoints.newest_path == str(tmp_path / "epoch=1.ckpt")
    assert state.checkpoints.newest_bytes == 2000


def test_symlink_into_another_mount_reports_the_target_mount(
    tmp_path: Path, tmpfs_mount, guard: MountGuard
) -> None:
    m = tmpfs_mount("8m")
    link = tmp_path / "logs"
    link.symlink_to(m.path)
    state = inspect_path(str(link), FAST, probe=False, guard=guard)
    assert state.path == str(link)  # the key stays what the user asked for
    assert state.mountpoint == str(m.mountpoint)
    assert state.kind == "memory" and state.fstype == "tmpfs"
    assert state.total_bytes == 8 * 1024 * 1024


def test_tmpfs_is_memory_without_a_device(tmpfs_mount, guard: MountGuard) -> None:
    m = tmpfs_mount("16m")
    state = inspect_path(str(m.path), FAST, guard=guard)
    assert (state.kind, state.fstype, state.device, state.shared) == (
        "memory",
        "tmpfs",
        None,
        False,
    )
    assert state.total_bytes == 16 * 1024 * 1024
    assert state.probe is not None and state.probe.samples == FAST.probe_writes
    assert probe_files(m.path) == []


def test_loop_ext4_reports_the_loop_device(loop_ext4, guard: MountGuard) -> None:
    m = loop_ext4(32)
    state = inspect_path(str(m.path), FAST, guard=guard)
    assert state.kind == "local" and state.fstype == "ext4"
    assert state.device == m.device and state.device.startswith("loop")
    assert state.source == f"/dev/{m.device}"
    assert 20 * 1024 * 1024 < state.total_bytes <= 32 * 1024 * 1024
    # ext4 keeps some clusters for root even with -m 0 (s_resv_clusters): avail < free
    assert 0 < state.avail_bytes <= state.free_bytes <= state.total_bytes
    with open("/proc/diskstats") as fh:
        assert m.device in {line.split()[2] for line in fh}


def test_read_only_mount_is_reported_and_never_written(readonly_mount, guard) -> None:
    before = sorted(os.listdir(readonly_mount.path))
    state = inspect_path(str(readonly_mount.path), FAST, guard=guard)
    assert state.read_only and state.responsive
    assert state.probe is not None and state.probe.error == READ_ONLY
    assert sorted(os.listdir(readonly_mount.path)) == before


def test_sshfs_is_a_shared_network_filesystem(sshfs_mount, guard: MountGuard) -> None:
    state = inspect_path(str(sshfs_mount.path), FAST, probe=False, guard=guard)
    assert state.fstype == "fuse.sshfs"
    assert state.kind == "shared" and state.shared
    assert state.device is None
    assert state.mountpoint == str(sshfs_mount.mountpoint)
    assert state.source.endswith(str(sshfs_mount.remote))
    assert state.exists and state.responsive and state.total_bytes


def test_probe_on_sshfs_is_slower_than_on_tmpfs(sshfs_mount, tmpfs_mount, guard) -> None:
    fast = inspect_path(str(tmpfs_mount("8m").path), FAST, guard=guard).probe
    slow = inspect_path(str(sshfs_mount.path), FAST, guard=guard).probe
    assert fast is not None and slow is not None
    assert fast.error is None and slow.error is None, (fast, slow)
    assert slow.p50_ms > fast.p50_ms, (slow, fast)
    assert probe_files(sshfs_mount.remote / "work") == []


def test_paused_sshfs_is_unresponsive_within_the_timeout(sshfs_mount, guard) -> None:
    guard.prestart(str(sshfs_mount.mountpoint))  # as PathsSource.add does
    sshfs_mount.pause()
    try:
        t0 = time.monotonic()
        state = inspect_path(str(sshfs_mount.path), FAST, guard=guard)
        elapsed = time.monotonic() - t0
    finally:
        sshfs_mount.resume()
    assert not state.responsive
    assert state.error == "no answer within 1.0 s (statvfs)"
    # what the mount table says is still reported
    assert state.fstype == "fuse.sshfs" and state.shared
    assert state.total_bytes is None and state.probe is None
    assert elapsed < FAST.mount_timeout_s + 2.0, elapsed  # the timeout, plus start-up slack


def test_locate_existence_through_the_guard(tmp_path: Path, guard: MountGuard) -> None:
    (tmp_path / "file").write_text("")
    here = paths_mod.locate(str(tmp_path), guard)
    assert here.exists and here.nearest == str(tmp_path) and here.nearest_is_dir
    later = paths_mod.locate(str(tmp_path / "runs" / "1"), guard)
    assert not later.exists and later.nearest == str(tmp_path) and later.nearest_is_dir
    blocked = paths_mod.locate(str(tmp_path / "file" / "x"), guard)
    assert not blocked.exists and blocked.nearest == str(tmp_path / "file")
    assert not blocked.nearest_is_dir
    # judged (core.paths.names.judge) as check judges it: the notebook's and the panel's answer
    assert here.note is None and here.refusal is None
    assert later.note == f"not created yet; checked at {tmp_path}" and later.refusal is None
    assert blocked.refusal == (
        f"{tmp_path / 'file' / 'x'} cannot exist: {tmp_path / 'file'} is a file, not a directory"
    )
    assert paths_mod.locate("/dev/null", guard).refusal is not None


def test_locate_on_a_dead_mount_raises_instead_of_hanging(sshfs_mount, guard) -> None:
    guard.call(str(sshfs_mount.mountpoint), "ping")  # started: the 0.5 s are the call's own
    sshfs_mount.pause()
    try:
        with pytest.raises(MountUnresponsive, match=r"within 0\.5 s \(stat\)"):
            paths_mod.locate(str(sshfs_mount.path / "logs"), guard, timeout=0.5)
    finally:
        sshfs_mount.resume()


# -- PathsSource ----------------------------------------------------------------------------


def test_source_add_remove_are_normalised_and_idempotent(tmp_path: Path) -> None:
    src = PathsSource(defaults=FAST, probe=False)
    try:
        key = src.add(str(tmp_path / "a" / ".." / "b"))
        assert key == str(tmp_path / "b")
        assert src.add(str(tmp_path / "b")) == key
        assert src.paths == [key]
        src.remove(str(tmp_path / "b" / "."))
        assert src.paths == []
        assert collect(src).paths == {}
    finally:
        src.close()


def test_source_collects_every_path_and_probes_in_the_background(
    tmp_path: Path, tmpfs_mount
) -> None:
    m = tmpfs_mount("8m")
    src = PathsSource([str(tmp_path), str(m.path), str(tmp_path / "later")], defaults=FAST)
    try:
        sample = collect(src)
        assert set(sample.paths) == {str(tmp_path), str(m.path), str(tmp_path / "later")}
        assert all(isinstance(s, PathState) and s.responsive for s in sample.paths.values())
        assert sample.paths[str(m.path)].kind == "memory"
        assert not sample.paths[str(tmp_path / "later")].exists
        assert sample.paths[str(tmp_path)].total_bytes
        assert wait_until(lambda: all(s.probe for s in collect(src).paths.values()))
        for state in collect(src).paths.values():
            assert state.probe.samples == FAST.probe_writes
        assert probe_files(tmp_path) == [] and probe_files(m.path) == []
    finally:
        src.close()


def test_source_rescans_checkpoints_at_most_every_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = PathsSource([str(tmp_path)], defaults=FAST, probe=False)
    key = str(tmp_path)
    try:
        (tmp_path / "model.pt").write_bytes(b"x" * 100)
        assert wait_until(lambda: collect(src).paths[key].checkpoints is not None)
        assert collect(src).paths[key].checkpoints.count == 1  # type: ignore[union-attr]
        (tmp_path / "model2.pt").write_bytes(b"x" * 200)
        time.sleep(0.3)
        assert collect(src).paths[key].checkpoints.count == 1  # type: ignore[union-attr]
        monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
        assert wait_until(lambda: collect(src).paths[key].checkpoints.count == 2)  # type: ignore[union-attr]
        assert collect(src).paths[key].checkpoints.newest_bytes == 200  # type: ignore[union-attr]
    finally:
        src.close()


def test_a_quiet_local_directory_is_not_listed_again_until_it_changes(
    tmpfs_mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looked at locally, a directory's mtime is known every tick: while it stays the same
    (and its last change has settled) the checkpoint listing is not repeated; a new file
    makes the next tick rescan; the idle rescan still comes eventually."""
    d = tmpfs_mount("8m").path
    (d / "model.pt").write_bytes(b"x" * 100)
    key = str(d)
    src = PathsSource([key], defaults=FAST, probe=False)

    def settle() -> CheckpointInfo | None:
        ended = time.monotonic() + 0.6
        while time.monotonic() < ended:
            state = collect(src).paths[key]
            time.sleep(0.05)
        return state.checkpoints

    try:
        monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
        monkeypatch.setattr(path_watch, "CHECKPOINT_SETTLE_S", 0.0)
        monkeypatch.setattr(path_watch, "CHECKPOINT_IDLE_RESCAN_S", 3600.0)
        assert wait_until(lambda: collect(src).paths[key].checkpoints is not None)
        assert settle().newest_bytes == 100  # type: ignore[union-attr]
        with open(d / "model.pt", "ab") as f:  # grows in place: the directory is unchanged
            f.write(b"x" * 100)
        assert settle().newest_bytes == 100  # type: ignore[union-attr]
        (d / "model2.pt").write_bytes(b"y" * 300)  # a new entry: the directory changed
        assert wait_until(lambda: collect(src).paths[key].checkpoints.count == 2)  # type: ignore[union-attr]
        monkeypatch.setattr(path_watch, "CHECKPOINT_IDLE_RESCAN_S", 0.0)
        with open(d / "model2.pt", "ab") as f:
            f.write(b"y" * 100)
        assert wait_until(lambda: collect(src).paths[key].checkpoints.newest_bytes == 400)  # type: ignore[union-attr]
    finally:
        src.close()


def test_a_local_directory_is_scanned_without_the_helper_and_not_into_mounts(
    tmpfs_mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once looked at locally, a directory's checkpoints are listed from our own thread (it
    works with every guard helper frozen), and a filesystem mounted below it is not entered
    (it may be a share that hangs)."""
    import signal

    outer, inner = tmpfs_mount("8m").path, tmpfs_mount("8m").path
    (outer / "checkpoint-1").mkdir()
    (outer / "checkpoint-1" / "model.safetensors").write_bytes(b"x" * 100)
    (inner / "model.safetensors").write_bytes(b"y" * 100)  # would count as a save if entered
    (outer / "mnt").mkdir()
    run(["mount", "--bind", str(inner), str(outer / "mnt")])
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    g = MountGuard(FAST.mount_timeout_s)
    src = PathsSource([str(outer)], defaults=FAST, probe=False, guard=g)
    frozen: list[int] = []
    try:
        key = str(outer)
        assert wait_until(lambda: collect(src).paths[key].checkpoints is not None)
        frozen = g.live_pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        (outer / "checkpoint-2").mkdir()
        (outer / "checkpoint-2" / "model.safetensors").write_bytes(b"z" * 300)
        newest = str(outer / "checkpoint-2")
        assert wait_until(lambda: collect(src).paths[key].checkpoints.newest_path == newest)  # type: ignore[union-attr]
        assert collect(src).paths[key].checkpoints.count == 2  # type: ignore[union-attr]
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        src.close()
        g.close()
        unmount(outer / "mnt")


def test_a_checkpoint_scan_out_of_time_never_makes_the_path_unresponsive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan has its own helper: while it is busy past its timeout (a big directory on a
    slow share), the per-tick statvfs still answers and the last checkpoints stay shown."""
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    (tmp_path / "model.pt").write_bytes(b"x" * 100)
    key = str(tmp_path)
    mountpoint = mount_for_path(key, read_mounts()).mountpoint
    d = replace(FAST, checkpoint_scan_budget_s=0.2, mount_timeout_s=0.5)
    g = MountGuard(d.mount_timeout_s)
    src = PathsSource([key], defaults=d, probe=False, guard=g)
    busy = threading.Thread(
        target=g.call,
        args=(path_look.scan_key(mountpoint), "sleep"),
        kwargs={"lane": path_look.SCAN_LANE, "timeout": 30, "seconds": 3.0},
        daemon=True,
    )
    try:
        assert wait_until(lambda: collect(src).paths[key].checkpoints is not None)
        busy.start()
        time.sleep(0.2)
        ended = time.monotonic() + 2.5
        while time.monotonic() < ended:  # scans time out behind the busy helper meanwhile
            state = collect(src).paths[key]
            assert state.responsive and state.error is None, state
            assert state.checkpoints is not None and state.checkpoints.count == 1
            time.sleep(0.1)
        alone = inspect_path(key, d, probe=False, guard=g)
        assert alone.responsive and alone.exists and alone.total_bytes
    finally:
        busy.join()
        src.close()
        g.close()


def test_source_with_a_dead_mount(sshfs_mount, tmp_path: Path) -> None:
    """A paused sshfs: the tick still returns within the timeout, the local path is still
    reported, no helper piles up, and the mount comes back once the server answers."""
    dead, alive = str(sshfs_mount.path), str(tmp_path)
    src = PathsSource([dead, alive], defaults=FAST)
    try:
        assert wait_until(lambda: collect(src).paths[dead].probe is not None)
        sshfs_mount.pause()
        t0 = time.monotonic()
        first = collect(src)
        elapsed = time.monotonic() - t0
        assert not first.paths[dead].responsive
        assert first.paths[dead].error == "no answer within 1.0 s (statvfs)"
        assert first.paths[alive].responsive and first.paths[alive].total_bytes
        assert elapsed < FAST.mount_timeout_s + 2.0, elapsed
        helpers = sorted(p.pid for p in guard_helpers())
        for _ in range(3):
            again = collect(src)
            assert not again.paths[dead].responsive
            assert again.paths[alive].responsive
        assert sorted(p.pid for p in guard_helpers()) == helpers  # nothing new started
        src.add(str(sshfs_mount.path / "new-logdir"))  # never touches the dead mount here
        sshfs_mount.resume()
        assert wait_until(lambda: collect(src).paths[dead].responsive, timeout=20)
        assert collect(src).paths[dead].total_bytes
    finally:
        sshfs_mount.resume()
        src.close()


def test_mounts_that_cannot_hang_are_looked_at_without_the_helper(
    tmpfs_mount, loop_ext4, tmp_path: Path
) -> None:
    """After the first (guarded) look, a path on tmpfs is answered on the sampler thread: it
    keeps answering with every guard helper frozen. A path on a loop device (its backing
    file could be on a share) and a symlink from tmpfs into that loop mount still go through
    the helper, so freezing it makes them unresponsive within the timeout."""
    import signal

    memory = tmpfs_mount("4m").path
    disk = loop_ext4(32).path
    link = memory / "to-loop"
    link.symlink_to(disk)
    # a timeout of several times a helper's start on a loaded machine: the first look
    # starts the helpers and must answer; the frozen ones cost the whole timeout once
    d = replace(FAST, mount_timeout_s=5.0)
    g = MountGuard(d.mount_timeout_s)
    src = PathsSource([str(memory), str(disk), str(link)], defaults=d, probe=False, guard=g)
    frozen: list[int] = []
    try:
        first = collect(src)
        assert all(s.responsive for s in first.paths.values()), first.paths
        assert first.paths[str(link)].fstype == "ext4"  # the symlink was followed
        frozen = g.live_pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        (memory / "grown").write_bytes(b"x" * 1024 * 1024)
        later = collect(src)
        assert later.paths[str(memory)].responsive and later.paths[str(memory)].error is None
        assert later.paths[str(memory)].free_bytes < first.paths[str(memory)].free_bytes
        for guarded in (str(disk), str(link)):
            assert not later.paths[guarded].responsive
            assert later.paths[guarded].error == "no answer within 5.0 s (statvfs)"
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        src.close()
        g.close()


def test_a_local_look_notices_a_path_replaced_by_a_symlink_or_removed(tmpfs_mount) -> None:
    """A watched directory on a mount that cannot hang, swapped for a symlink to another
    mount, goes back to the guard (which follows it) at once; removed, it is seen missing."""
    import shutil

    small, big = tmpfs_mount("4m").path, tmpfs_mount("16m").path
    watched = small / "run"
    watched.mkdir()
    src = PathsSource([str(watched)], defaults=FAST, probe=False)
    try:
        for _ in range(3):
            state = collect(src).paths[str(watched)]
            assert state.exists and state.mountpoint == str(small)
            assert state.total_bytes == 4 * 1024 * 1024
        shutil.rmtree(watched)
        watched.symlink_to(big)
        moved = collect(src).paths[str(watched)]
        assert moved.exists and moved.mountpoint == str(big)
        assert moved.total_bytes == 16 * 1024 * 1024
        watched.unlink()
        gone = collect(src).paths[str(watched)]
        assert gone.responsive and not gone.exists and gone.mountpoint == str(small)
    finally:
        src.close()


def test_look_without_following_answers_like_the_helper_or_declines(tmpfs_mount) -> None:
    """From our own thread: the same answer as the helper's inspect for a plain path (also
    one not created yet); None where a symlink or another mount is on the way."""
    from trainwatch_lab.core.paths.look import look_without_following
    from trainwatch_lab.core.worker.ops import op_inspect

    outer, inner = tmpfs_mount("4m").path, tmpfs_mount("4m").path
    (outer / "runs" / "exp1").mkdir(parents=True)
    (outer / "link").symlink_to(outer / "runs")
    mounts = read_mounts()
    entry = mount_for_path(str(outer), mounts)
    for path in (outer, outer / "runs" / "exp1", outer / "runs" / "later" / "deeper"):
        mine, helper = look_without_following(str(path), entry), op_inspect(str(path))
        assert mine is not None and mine.pop("mtime_ns") > 0
        del mine["statvfs"], helper["statvfs"]  # free space may move between the two
        assert mine == helper
    assert look_without_following(str(outer / "link" / "exp1"), entry) is None
    assert look_without_following(str(inner), entry) is None  # not under this mount at all
    run(["mount", "--bind", str(inner), str(outer / "runs" / "exp1")])
    try:  # a mount stacked below the watched path since the table was read
        assert look_without_following(str(outer / "runs" / "exp1"), entry) is None
    finally:
        unmount(outer / "runs" / "exp1")


def test_a_look_that_answers_after_its_tick_never_counts_as_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guarded look can end while a later tick waits for other paths: that tick must still
    say "no answer" (it asked nothing of that path), never publish the half-filled state of an
    earlier tick. Ordered by events, not sleeps: the slow path's look is held until the second
    tick's look at the other path releases it and waits for it to end, so the order holds on
    a loaded machine, with the whole mount timeout (2 s) as the margin for the quick steps."""
    d = replace(FAST, mount_timeout_s=2.0)
    g = MountGuard(d.mount_timeout_s)
    slow, other = str(tmp_path / "slow"), str(tmp_path / "other")
    (tmp_path / "target").mkdir()
    (tmp_path / "other").symlink_to(tmp_path / "target")  # a symlink: always guarded
    real_call = g.call
    release, slow_done = threading.Event(), threading.Event()
    looks_at_other: list[int] = []

    def call(key: str, op: str, **kw: object) -> object:
        if op == "inspect" and kw.get("path") == slow:
            release.wait(30)  # a share that answers, but only after its tick gave up
            try:
                return real_call(key, op, **kw)
            finally:
                slow_done.set()
        if op == "inspect":
            looks_at_other.append(1)
            if len(looks_at_other) == 2:  # the second tick: the slow look ends meanwhile
                release.set()
                slow_done.wait(30)
        return real_call(key, op, **kw)

    monkeypatch.setattr(g, "call", call)
    src = PathsSource([slow, other], defaults=d, probe=False, guard=g)
    try:
        first = collect(src)
        assert not first.paths[slow].responsive
        assert first.paths[other].responsive
        second = collect(src)  # the first look at `slow` ends while this tick waits
        assert slow_done.is_set()
        assert not second.paths[slow].responsive, second.paths[slow]
        assert second.paths[slow].error == "no answer within 2.0 s (statvfs)"
        assert second.paths[other].responsive
    finally:
        release.set()
        src.close()
        g.close()


def test_a_local_disk_is_probed_again_rarely_a_guarded_mount_often(tmpfs_mount, loop_ext4) -> None:
    """diskstats shows a local block device's latency every tick, so its write + fsync
    probe repeats every ``local_probe_every_s``; a mount seen only through the guard (here a
    loop device) is probed again every ``probe_every_s``."""
    memory, loop = str(tmpfs_mount("4m").path), str(loop_ext4(32).path)
    d = replace(FAST, probe_every_s=0.2, local_probe_every_s=3600.0)
    src = PathsSource([memory, loop], defaults=d)
    try:
        assert wait_until(lambda: all(s.probe for s in collect(src).paths.values()))
        time.sleep(0.5)  # a probe started by the first (guarded) look ends meanwhile
        first = collect(src).paths
        ended = time.monotonic() + 2.0
        while time.monotonic() < ended:
            later = collect(src).paths
            time.sleep(0.1)
        assert later[memory].probe is first[memory].probe
        assert later[loop].probe is not first[loop].probe
        assert probe_files(Path(memory)) == [] and probe_files(Path(loop)) == []
    finally:
        src.close()


def test_source_is_thread_safe(tmp_path: Path) -> None:
    """The sampler thread collects while a surface adds and removes paths."""
    src = PathsSource([str(tmp_path)], defaults=FAST, probe=False)
    errors: list[BaseException] = []
    stop = time.monotonic() + 1.5

    def sampler() -> None:
        try:
            while time.monotonic() < stop:
                sample = collect(src)
                assert str(tmp_path) in sample.paths
                assert all(s.responsive for s in sample.paths.values())
        except BaseException as exc:
            errors.append(exc)

    def surface(n: int) -> None:
        try:
            while time.monotonic() < stop:
                key = src.add(str(tmp_path / f"run{n}"))
                src.remove(key)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=sampler),
        *(threading.Thread(target=surface, args=(i,)) for i in range(3)),
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        src.close()
    assert errors == []


def test_overlay_reports_the_device_of_its_upper_layer(
    loop_ext4, tmp_path: Path, guard: MountGuard
) -> None:
    """Writes to an overlay land in its upperdir: that is the disk to watch."""
    need_root()
    need("overlay" in Path("/proc/filesystems").read_text(), "needs overlayfs")
    disk = loop_ext4(32)
    lower, merged = tmp_path / "lower", tmp_path / "merged"
    upper, work = disk.path / "upper", disk.path / "work"
    for d in (lower, merged, upper, work):
        d.mkdir()
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}"
    run(["mount", "-t", "overlay", "overlay", "-o", opts, str(merged)])
    try:
        state = inspect_path(str(merged), FAST, guard=guard)
        assert state.kind == "overlay" and state.fstype == "overlay"
        assert state.device == disk.device
        assert state.probe is not None and state.probe.samples == FAST.probe_writes
        assert not state.shared
    finally:
        unmount(merged)
    assert [n for n in os.listdir(upper) if LEFTOVER.match(n)] == []


def test_facts_of_an_unmounted_filesystem_do_not_stay(tmpfs_mount) -> None:
    """A watched path whose tmpfs is unmounted now lives on the filesystem below: its kind,
    write latency and checkpoints are that filesystem's, never the tmpfs's (the panel showed
    "local (ext4) write+fsync 4 us", the tmpfs's probe under the disk's name). The probe of
    the filesystem now under it comes when the next one is due."""
    m = tmpfs_mount("8m")
    logs = m.path / "logs"
    logs.mkdir()
    (logs / "last.ckpt").write_bytes(b"\0" * 4096)
    src = PathsSource([str(logs)], defaults=FAST)
    try:
        assert wait_until(
            lambda: (s := collect(src).paths[str(logs)]).probe and s.checkpoints, timeout=30
        )
        before = collect(src).paths[str(logs)]
        assert before.fstype == "tmpfs"
        unmount(m.path)
        after = collect(src).paths[str(logs)]
        assert after.fstype != "tmpfs" and after.mountpoint != str(m.path)
        assert after.probe is None or after.probe is not before.probe, after.probe
        assert after.checkpoints is None
        # a probe of the filesystem below comes, and it is no tmpfs probe from before
        assert wait_until(lambda: collect(src).paths[str(logs)].probe is not None, timeout=30)
        assert collect(src).paths[str(logs)].probe is not before.probe
    finally:
        src.close()


def test_short_path_keeps_the_last_components_as_the_panel_does() -> None:
    assert short_path("/mnt/share/runs") == "/mnt/share/runs"
    assert short_path("/tmp/a/b/gpu-lab/ckpt/") == "…/b/gpu-lab/ckpt"
    assert short_path("/tmp/a/b/gpu-lab/ckpt", parts=2) == "…/gpu-lab/ckpt"
    assert short_path("relative/dir") == "relative/dir"
