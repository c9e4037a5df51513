"""core.storage.probe: the probe measures, stays bounded and never leaves its file behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.guard.guard import PROBE_LANE, MountGuard, MountUnresponsive
from trainwatch_lab.core.storage import probe as probe_mod
from trainwatch_lab.core.storage.mounts import classify, mount_for_path, read_mounts
from trainwatch_lab.core.storage.probe import (
    LEFTOVER,
    READ_ONLY,
    clean_leftovers,
    local_baseline,
    probe_directory,
    probe_name,
)

REPO = Path(__file__).resolve().parents[3]


def probe_file(pid: int, token: str, host: str | None = None) -> str:
    """The name a probe by ``pid`` on ``host`` (this one by default) gives its file."""
    return f".trainwatch-probe-{probe_mod.host_tag(host)}-{pid}-{token}.tmp"


def dead_pid() -> int:
    """A pid no process has here now (one that ran and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def listing(directory: Path | str) -> list[str]:
    return sorted(os.listdir(directory))


def test_name_matches_the_leftover_pattern() -> None:
    m = LEFTOVER.match(probe_name())
    assert m and int(m.group("pid")) == os.getpid()
    assert m.group("host") == probe_mod.host_tag() == probe_mod.host_tag(socket.gethostname())
    assert probe_name() != probe_name()
    assert probe_name().startswith(".")  # hidden from ls and from most log readers


def test_probe_measures_and_removes_its_file(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents").write_text("x")
    before = listing(tmp_path)
    result = probe_directory(str(tmp_path), writes=8, block_bytes=4096, budget_s=10)
    assert result.error is None
    assert result.samples == 8
    assert 0 < result.p50_ms <= result.p99_ms
    assert listing(tmp_path) == before


def test_budget_stops_the_probe_early(tmp_path: Path) -> None:
    result = probe_directory(
        str(tmp_path), writes=1000, block_bytes=512, budget_s=0.3, interval_s=0.05
    )
    assert 1 <= result.samples < 1000
    assert listing(tmp_path) == []


def test_keyboard_interrupt_mid_probe_removes_the_file(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def interrupt(i: int) -> None:
        seen.append(listing(tmp_path))
        if i == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        probe_directory(str(tmp_path), writes=16, block_bytes=4096, budget_s=10, on_write=interrupt)
    assert len(seen) == 3 and LEFTOVER.match(seen[-1][0])  # the file existed mid-probe
    assert listing(tmp_path) == []


@pytest.fixture
def raw_worker() -> Iterator[subprocess.Popen[str]]:
    """A helper process driven by hand, to signal it in the middle of a probe."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainwatch_lab.core.worker.main"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd="/",
    )
    assert json.loads(proc.stdout.readline())["ready"]
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def start_long_probe(proc: subprocess.Popen[str], directory: Path) -> str:
    """Ask for a probe that runs for a long time; return its file name once it exists."""
    req = {
        "id": 1,
        "op": "probe",
        "args": {
            "directory": str(directory),
            "writes": 100000,
            "block_bytes": 512,
            "budget_s": 60,
            "interval_s": 0.02,
        },
    }
    proc.stdin.write(json.dumps(req) + "\n")
    proc.stdin.flush()
    assert wait_until(lambda: any(LEFTOVER.match(n) for n in listing(directory)))
    return next(n for n in listing(directory) if LEFTOVER.match(n))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_helper_mid_probe_removes_the_file(
    raw_worker: subprocess.Popen[str], tmp_path: Path, signum: int
) -> None:
    name = start_long_probe(raw_worker, tmp_path)
    assert name.startswith(f".trainwatch-probe-{probe_mod.host_tag()}-{raw_worker.pid}-")
    raw_worker.send_signal(signum)
    raw_worker.wait(timeout=20)
    assert listing(tmp_path) == []


def test_sigkilled_helper_leaves_a_file_that_clean_leftovers_removes(
    raw_worker: subprocess.Popen[str], tmp_path: Path
) -> None:
    name = start_long_probe(raw_worker, tmp_path)
    raw_worker.kill()
    raw_worker.wait(timeout=20)
    assert listing(tmp_path) == [name]  # SIGKILL: nobody could clean up
    # files of running processes (another probe in progress, ours) and other files stay
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / probe_file(sleeper.pid, "00ff")
        own = tmp_path / probe_file(os.getpid(), "00aa")
        other = tmp_path / ".trainwatch-probe-notes.txt"
        for f in (live, own, other):
            f.write_text("")
        assert clean_leftovers(str(tmp_path)) == 1
        assert listing(tmp_path) == sorted([live.name, own.name, other.name])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert clean_leftovers(str(tmp_path)) == 1  # the sleeper is gone now
    assert sorted(listing(tmp_path)) == sorted([own.name, other.name])


def test_very_old_probe_files_are_leftovers_whatever_their_pid(tmp_path: Path) -> None:
    old = tmp_path / probe_file(os.getppid(), "0bad")
    old.write_text("")
    assert clean_leftovers(str(tmp_path)) == 0  # pid alive and the file is fresh
    past = time.time() - probe_mod.STALE_AFTER_S - 60
    os.utime(old, (past, past))
    assert clean_leftovers(str(tmp_path)) == 1


def test_host_names_with_dashes_digits_and_odd_characters_parse() -> None:
    for host, tag in (("node-7", "node-7"), ("gpu01.cluster", "gpu01.cluster"), ("a b/c", "a_b_c")):
        m = LEFTOVER.match(probe_name(host))
        assert m and m.group("host") == tag and int(m.group("pid")) == os.getpid()
    assert probe_mod.host_tag("") == "unknown"
    assert len(probe_mod.host_tag("x" * 300)) == probe_mod.HOST_MAX
    legacy = LEFTOVER.match(".trainwatch-probe-4242-00ff.tmp")  # before hosts were named
    assert legacy and legacy.group("host") is None and legacy.group("pid") == "4242"


AS_HOST = """
import socket, sys, time
socket.gethostname = lambda: sys.argv[1]
from trainwatch_lab.core.storage.probe import clean_leftovers, probe_directory
if sys.argv[2] == "clean":
    print(clean_leftovers(sys.argv[3]))
else:
    probe_directory(sys.argv[3], writes=100000, block_bytes=512, budget_s=60, interval_s=0.02)
"""


def as_host(host: str, *args: str) -> subprocess.Popen[str]:
    """This code run as if on another machine: ``socket.gethostname`` says ``host``."""
    return subprocess.Popen(
        [sys.executable, "-c", AS_HOST, host, *args],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )


def test_two_hosts_sharing_a_directory_clean_only_their_own_dead_probe_files(
    tmp_path: Path,
) -> None:
    """Agents on node-a and node-b probe one share. A pid is only meaningful on the host that
    started it: node-a removes its own dead probe file, never node-b's (whose pid, dead here,
    may be probing right now over there), unless it is older than the staleness age."""
    gone = dead_pid()
    mine = tmp_path / probe_file(gone, "00aa", "node-a")
    theirs = tmp_path / probe_file(gone, "00bb", "node-b")
    theirs_old = tmp_path / probe_file(gone, "00cc", "node-b")
    legacy = tmp_path / f".trainwatch-probe-{gone}-00dd.tmp"  # no host: could be anyone's
    for f in (mine, theirs, theirs_old, legacy):
        f.write_text("")
    past = time.time() - probe_mod.STALE_AFTER_S - 60
    os.utime(theirs_old, (past, past))
    live_b = as_host("node-b", "probe", str(tmp_path))  # node-b probing right now
    try:
        assert wait_until(lambda: len(listing(tmp_path)) == 5)
        probing = (set(listing(tmp_path)) - {mine.name, theirs.name, theirs_old.name}) - {
            legacy.name
        }
        (probing_name,) = probing
        assert probing_name.startswith(f".trainwatch-probe-node-b-{live_b.pid}-")
        a = as_host("node-a", "clean", str(tmp_path))
        assert a.communicate(timeout=60)[0].strip() == "2"  # its own dead one, b's stale one
        assert listing(tmp_path) == sorted([theirs.name, legacy.name, probing_name])
        b = as_host("node-b", "clean", str(tmp_path))
        assert b.communicate(timeout=60)[0].strip() == "1"  # its dead one; its live probe stays
        assert listing(tmp_path) == sorted([legacy.name, probing_name])
    finally:
        live_b.send_signal(signal.SIGINT)  # KeyboardInterrupt: the probe removes its file
        live_b.wait(timeout=20)
    assert listing(tmp_path) == [legacy.name]


def test_worker_probe_cleans_leftovers_first_and_probes_the_parent_of_a_new_logdir(
    tmp_path: Path,
) -> None:
    leftover = tmp_path / probe_file(dead_pid(), "dead")
    leftover.write_text("")
    with MountGuard() as g:
        raw = g.call(
            "/",
            "probe",
            lane=PROBE_LANE,
            directory=str(tmp_path / "not-yet"),
            writes=4,
            block_bytes=4096,
            budget_s=2,
        )
    assert raw["samples"] == 4 and raw["error"] is None
    assert listing(tmp_path) == []  # leftover removed, no logdir created, no probe file


def worker_probe(g: MountGuard, directory: str | Path) -> dict:
    return g.call(
        "/",
        "probe",
        lane=PROBE_LANE,
        directory=str(directory),
        writes=4,
        block_bytes=4096,
        budget_s=2,
    )


def test_worker_probes_the_nearest_existing_ancestor_of_a_deeper_new_logdir(
    tmp_path: Path,
) -> None:
    """``check /mnt/share/runs/exp1`` before ``runs`` exists: measured in /mnt/share, where
    the run will write (the same filesystem), nothing created, the probe file removed."""
    with MountGuard() as g:
        raw = worker_probe(g, tmp_path / "runs" / "exp1")
    assert raw["samples"] == 4 and raw["error"] is None
    assert listing(tmp_path) == []


def test_worker_never_probes_next_to_a_file_in_the_way(tmp_path: Path) -> None:
    """``/etc/passwd/x`` can never be created: nothing is written into /etc."""
    (tmp_path / "file").write_text("x")
    leftover = tmp_path / ".trainwatch-probe-999999999-dead.tmp"
    leftover.write_text("")
    mtime = os.stat(tmp_path).st_mtime_ns
    with MountGuard() as g:
        raw = worker_probe(g, tmp_path / "file" / "x")
    assert raw["samples"] == 0 and raw["p50_ms"] is None
    assert raw["error"] == f"not probed: {tmp_path / 'file'} is not a directory"
    assert listing(tmp_path) == sorted(["file", leftover.name])  # nothing touched
    assert os.stat(tmp_path).st_mtime_ns == mtime


def test_worker_never_opens_a_fifo_or_a_device(tmp_path: Path) -> None:
    """Opening a FIFO blocks until a writer comes; a device is no storage. Neither is probed
    (nor is the directory it sits in: the user asked about the node, not the directory)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    mtime = os.stat(tmp_path).st_mtime_ns
    with MountGuard() as g:
        for node, what in ((fifo, "FIFO"), ("/dev/null", "character device")):
            raw = worker_probe(g, node)
            assert raw["samples"] == 0
            assert raw["error"] == f"not probed: {node} is a {what}, not storage"
    assert listing(tmp_path) == ["pipe"] and os.stat(tmp_path).st_mtime_ns == mtime


KERNEL_DIRS = ["/dev", "/proc", "/proc/self", "/sys", "/sys/kernel"]


def _pseudo(directory: str) -> str:
    return mount_for_path(os.path.realpath(directory), read_mounts()).fstype


@pytest.mark.parametrize("directory", KERNEL_DIRS)
def test_probe_refuses_a_kernel_pseudo_filesystem(directory: str) -> None:
    """The real /dev (devtmpfs, which statvfs cannot tell from tmpfs), /proc and /sys: the
    probe refuses before it creates anything, whoever calls it."""
    fstype = _pseudo(directory)
    if fstype not in ("devtmpfs", "proc", "sysfs"):  # a container's /dev is a plain tmpfs
        pytest.skip(f"{directory} is {fstype} here")
    before, mtime = listing(directory), os.stat(directory).st_mtime_ns
    result = probe_directory(directory, writes=4, block_bytes=4096, budget_s=2)
    assert (result.samples, result.p50_ms) == (0, None)
    assert result.error == (f"not probed: {directory} is on {fstype}, a kernel pseudo-filesystem")
    assert probe_mod.probe_refusal(directory) == result.error
    with MountGuard() as g:  # the helper, for the directory or a logdir not created yet
        for asked in (directory, os.path.join(directory, "not-yet", "x")):
            raw = worker_probe(g, asked)
            assert raw["samples"] == 0 and "pseudo-filesystem" in raw["error"], raw
    if directory == "/dev":
        assert listing(directory) == before and os.stat(directory).st_mtime_ns == mtime
    assert not [n for n in listing(directory) if n.startswith(probe_mod.PREFIX)]


def test_probe_refuses_what_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    result = probe_directory(str(tmp_path / "f"), writes=4, block_bytes=4096, budget_s=2)
    assert result.error == f"not probed: {tmp_path / 'f'} is not a directory"
    assert listing(tmp_path) == ["f"]
    assert probe_mod.probe_refusal(str(tmp_path)) is None  # a plain directory is storage


def test_read_only_mount_is_reported_and_never_written(readonly_mount) -> None:
    before = listing(readonly_mount.path)
    mtime = os.stat(readonly_mount.path).st_mtime_ns
    result = probe_directory(str(readonly_mount.path), writes=4, block_bytes=4096, budget_s=2)
    assert result.error == READ_ONLY
    assert result.samples == 0 and result.p50_ms is None
    assert listing(readonly_mount.path) == before
    assert os.stat(readonly_mount.path).st_mtime_ns == mtime


def test_probe_on_a_full_filesystem_reports_the_error(tmpfs_mount) -> None:
    m = tmpfs_mount("64k")
    fd = os.open(m.path / "fill", os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    result = probe_directory(str(m.path), writes=4, block_bytes=65536, budget_s=2)
    assert result.samples == 0
    assert "No space left" in (result.error or "")
    assert listing(m.path) == ["fill"]


def test_stuck_probe_helper_removes_its_file_once_the_mount_answers(sshfs_mount) -> None:
    """The server stops answering mid-probe: the call times out, the helper gets SIGTERM, and
    when its write returns (server resumed) it removes its file before exiting."""
    key, remote = str(sshfs_mount.mountpoint), sshfs_mount.remote / "work"
    g = MountGuard()
    outcome: list[BaseException] = []

    def long_probe() -> None:
        try:
            g.call(
                key,
                "probe",
                lane=PROBE_LANE,
                timeout=4.0,
                directory=str(sshfs_mount.path),
                writes=100000,
                block_bytes=512,
                budget_s=60,
                interval_s=0.02,
            )
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=long_probe)
    try:
        caller.start()
        assert wait_until(lambda: any(LEFTOVER.match(n) for n in listing(remote)))
        sshfs_mount.pause()
        caller.join(30)
        assert not caller.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], MountUnresponsive)
        assert g.is_stuck(key)
        assert [n for n in listing(remote) if LEFTOVER.match(n)] != []  # still there, stuck
        sshfs_mount.resume()
        assert wait_until(lambda: not g.is_stuck(key))
        assert [n for n in listing(remote) if LEFTOVER.match(n)] == []
    finally:
        sshfs_mount.resume()
        caller.join(30)
        g.close()


def test_local_baseline_probes_local_storage_and_is_cached() -> None:
    mounts = read_mounts()
    local = [
        d for d in probe_mod.baseline_candidates() if classify(mount_for_path(d, mounts)) == "local"
    ]
    if not local:
        pytest.skip("no local block storage among $HOME, cwd, /var/tmp, $TMPDIR here")
    first = local_baseline(DEFAULTS, refresh=True)
    assert first is not None and first.error is None
    assert first.samples >= 1 and first.p50_ms > 0
    assert local_baseline(DEFAULTS) is first  # cached for baseline_ttl_s
    assert [n for n in listing(local[0]) if LEFTOVER.match(n)] == []
