"""core.guard.guard: real helper processes, real timeouts, and a real dead mount (paused sshfs)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import guard_helpers, still_runs, thread_states, wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.guard.guard import (
    PROBE_LANE,
    MountGuard,
    MountUnresponsive,
    WorkerFailed,
    WorkerUnavailable,
)
from trainwatch_lab.core.guard.helper import HelperDied, HelperProcess
from trainwatch_lab.core.paths import look as path_look
from trainwatch_lab.core.storage.probe import LEFTOVER

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def guard() -> Iterator[MountGuard]:
    g = MountGuard(timeout_s=5.0, inline=False)  # the helpers themselves, local paths too
    yield g
    g.close()


def gone(pid: int) -> bool:
    return not still_runs(pid)


def test_calls_run_in_one_reused_helper_process(guard: MountGuard) -> None:
    first = guard.call("/", "ping")["pid"]
    second = guard.call("/", "ping")["pid"]
    assert first == second != os.getpid()
    assert guard.live_pids() == [first]


def test_os_errors_cross_the_process_boundary(guard: MountGuard, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError) as info:
        guard.call("/", "statvfs", path=missing)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == missing
    st = guard.call("/", "statvfs", path=str(tmp_path))
    assert os.statvfs_result(tuple(st)).f_blocks == os.statvfs(tmp_path).f_blocks


def test_unknown_operation_is_a_plain_failure(guard: MountGuard) -> None:
    with pytest.raises(WorkerFailed, match="BadRequest"):
        guard.call("/", "no-such-op")
    assert guard.call("/", "ping")  # the helper survives a bad request


def test_timeout_reports_unresponsive_then_a_fresh_helper_serves(guard: MountGuard) -> None:
    old = guard.call("/x", "ping")["pid"]
    with pytest.raises(MountUnresponsive) as info:
        guard.call("/x", "sleep", timeout=0.5, seconds=60)
    assert str(info.value) == "no answer within 0.5 s (sleep)"
    assert info.value.key == "/x"
    # the helper was killed (a sleep is interruptible, so it dies at once) ...
    assert wait_until(lambda: gone(old))
    assert wait_until(lambda: not guard.is_stuck("/x"))
    # ... and the next call gets a new one
    new = guard.call("/x", "ping")["pid"]
    assert new != old


def test_label_names_the_call(guard: MountGuard) -> None:
    guard.call("/y", "ping")  # started: the short timeout below is the call's alone
    with pytest.raises(MountUnresponsive, match=r"within 0\.3 s \(statvfs\)"):
        guard.call("/y", "sleep", timeout=0.3, what="statvfs", seconds=60)


def test_a_slow_mount_does_not_delay_another(guard: MountGuard) -> None:
    guard.call("/slow", "ping")
    guard.call("/fast", "ping")
    outcome: list[BaseException] = []

    def slow() -> None:
        try:
            guard.call("/slow", "sleep", timeout=30, seconds=3)
        except BaseException as exc:  # pragma: no cover - reported below
            outcome.append(exc)

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.2)
    guard.call("/fast", "ping")
    assert t.is_alive(), "the call on /fast had to wait for /slow"
    t.join()
    assert outcome == []


def test_the_probe_lane_does_not_delay_the_main_lane(guard: MountGuard) -> None:
    guard.call("/m", "ping")
    t = threading.Thread(
        target=guard.call, args=("/m", "sleep"), kwargs={"lane": "probe", "seconds": 3}
    )
    t.start()
    time.sleep(0.2)
    guard.call("/m", "ping")
    assert t.is_alive()
    t.join()


def test_waiting_for_the_call_before_is_not_counted_as_no_answer(guard: MountGuard) -> None:
    """Issue 34: `check SHARE/a SHARE/b` called a slow share dead. The second path's calls
    waited for the first's on the share's one helper, and that wait ate the second's own
    timeout: it raised MountUnresponsive (and killed a helper that was answering) though
    the share had answered every call. A call's time starts when the helper takes it; while
    the call before it is within its own time, waiting for it is no evidence."""
    guard.call("/share", "ping")
    first: list[BaseException] = []

    def before() -> None:
        try:
            guard.call("/share", "sleep", timeout=30, seconds=2.5)
        except BaseException as exc:  # pragma: no cover - reported below
            first.append(exc)

    t = threading.Thread(target=before)
    t.start()
    while not guard._workers["/share"].lane("main").lock.locked():
        time.sleep(0.01)
    pid = guard.live_pids()
    # its own part (1 s) fits its timeout (2 s) twice; with the wait before it, it would not
    guard.call("/share", "sleep", timeout=2.0, seconds=1.0)
    t.join()
    assert first == []
    assert guard.live_pids() == pid and not guard.is_stuck("/share")


def test_a_call_queued_behind_one_that_got_no_answer_is_unresponsive_too(
    guard: MountGuard,
) -> None:
    """A path on a mount, waiting on the mount's helper behind a call that got no answer,
    was told "helper process was replaced; try again" (WorkerUnavailable), which the paths
    source reported as an answer: responsive, the path missing. Seen in CI, a symlink into
    a loop mount beside the mount itself. Its mount did not answer: neither does it."""
    guard.call("/share", "ping")
    first: list[BaseException] = []

    def stuck() -> None:
        try:
            guard.call("/share", "sleep", timeout=5.0, seconds=120)
        except BaseException as exc:
            first.append(exc)

    t = threading.Thread(target=stuck)
    t.start()
    while not guard._workers["/share"].lane("main").lock.locked():
        time.sleep(0.01)
    # its own time (20 s) is longer than the call before it (5 s): it waits for that one
    with pytest.raises(MountUnresponsive) as queued:
        guard.call("/share/b", "sleep", timeout=20.0, mount="/share", seconds=0.1)
    t.join()
    assert [type(e) for e in first] == [MountUnresponsive]
    assert str(queued.value) == "no answer within 5.0 s (sleep)"
    assert queued.value.key == "/share/b"


def test_concurrent_callers_share_the_helper(guard: MountGuard) -> None:
    others = {p.pid for p in guard_helpers()}  # helpers of other guards in this process
    pids: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(10):
            pid = guard.call("/", "ping")["pid"]
            with lock:
                pids.append(pid)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(pids) == 80
    assert len(set(pids)) == 1
    assert [p.pid for p in guard_helpers() if p.pid not in others] == pids[:1]


def test_a_helper_killed_from_outside_is_replaced(guard: MountGuard) -> None:
    pid = guard.call("/", "ping")["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    assert guard.call("/", "ping")["pid"] != pid


def test_close_stops_helpers(tmp_path: Path) -> None:
    g = MountGuard()
    pid = g.call("/", "ping")["pid"]
    g.close()
    assert wait_until(lambda: gone(pid))


# -- a real dead mount ------------------------------------------------------------------------


def test_no_pile_up_on_a_dead_mount_and_recovery(sshfs_mount) -> None:
    key, path = str(sshfs_mount.mountpoint), str(sshfs_mount.path)
    g = MountGuard(timeout_s=1.0)
    others = {p.pid for p in guard_helpers()}  # helpers of other guards in this process
    try:
        assert g.call(key, "statvfs", path=path)
        sshfs_mount.pause()
        with pytest.raises(MountUnresponsive, match=r"no answer within 1\.0 s") as first:
            g.call(key, "statvfs", path=path)
        stuck = g.stuck_pids(key)
        assert len(stuck) == 1
        # SIGKILL was sent, yet the helper lives on: it sleeps uninterruptibly in statfs
        time.sleep(0.5)
        assert "D" in thread_states(stuck[0])
        for _ in range(5):
            with pytest.raises(MountUnresponsive) as again:
                g.call(key, "statvfs", path=path)
            # answered from the record of the first failure, not by a new attempt
            assert again.value.since == first.value.since
        # no new helper was started
        assert [p.pid for p in guard_helpers() if p.pid not in others] == stuck
        sshfs_mount.resume()
        assert wait_until(lambda: not g.is_stuck(key)), "the stuck helper never exited"
        fresh = g.call(key, "ping")["pid"]
        assert fresh != stuck[0]
        assert g.call(key, "statvfs", path=path)
    finally:
        sshfs_mount.resume()
        g.close()


def test_interpreter_exit_never_waits_on_a_stuck_helper(sshfs_mount) -> None:
    """A script whose helper is stuck on a dead mount still exits promptly."""
    sshfs_mount.pause()
    script = textwrap.dedent(
        f"""
        import sys
        from trainwatch_lab.core.guard.guard import MountGuard, MountUnresponsive
        g = MountGuard(timeout_s=0.5)
        try:
            g.call({str(sshfs_mount.mountpoint)!r}, "statvfs", path={str(sshfs_mount.path)!r})
        except MountUnresponsive as exc:
            print("unresponsive:", exc, flush=True)
        """
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=REPO,
        )
    finally:
        sshfs_mount.resume()
    assert out.returncode == 0, out.stderr
    assert "unresponsive: no answer within 0.5 s (statvfs)" in out.stdout


def test_a_helper_that_cannot_start_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """E.g. a broken install: the helper dies before it is ready; its last stderr line is the
    reason given, and the mount is not called unresponsive."""
    from trainwatch_lab.core.guard import helper as guard_helper

    crash = "import sys; sys.stderr.write('ImportError: no module named x\\n'); sys.exit(3)"
    monkeypatch.setattr(guard_helper, "worker_command", lambda: [sys.executable, "-c", crash])
    g = MountGuard(timeout_s=10)
    try:
        with pytest.raises(WorkerUnavailable, match=r"status 3\): ImportError: no module named x"):
            g.call("/", "ping")
        assert not g.is_stuck("/")
    finally:
        g.close()


def test_stray_output_of_a_helper_is_not_taken_for_an_answer(guard: MountGuard) -> None:
    pid = guard.call("/", "ping")["pid"]
    # a line on the helper's stdout that is not JSON, as a misbehaving library might print
    with open(f"/proc/{pid}/fd/1", "w") as out:
        out.write("hello from a library\n")
    assert guard.call("/", "ping")["pid"] == pid


# -- closed under a call (unload, interpreter exit) -------------------------------------------


def test_a_call_in_flight_when_the_guard_closes_ends_with_worker_unavailable() -> None:
    """Closed under a call (``%unload_ext``, atexit): the call ends with the guard's own
    exception as soon as the helper leaves, never with EBADF from our closed pipe (an
    OSError reads as the mount's own error) and never by waiting for its deadline."""
    g = MountGuard(timeout_s=10.0)
    pid = g.call("/", "ping")["pid"]
    os.kill(pid, signal.SIGSTOP)  # the next call stays in flight until SIGCONT
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            g.call("/", "ping")
        except BaseException as exc:  # reported below
            outcome.append(exc)

    t = threading.Thread(target=call)
    try:
        t.start()
        time.sleep(0.3)
        started = time.monotonic()
        g.close()
    finally:
        os.kill(pid, signal.SIGCONT)  # it gets close()'s SIGTERM now, and exits
    t.join(10)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], WorkerUnavailable), outcome
    assert str(outcome[0]) == "guard was closed during the call"
    assert time.monotonic() - started < 5.0
    with pytest.raises(WorkerUnavailable, match="guard is closed"):
        g.call("/", "ping")


def test_a_closed_helper_is_reported_gone_and_its_stderr_read_safely() -> None:
    """The pipes of a helper closed under its caller: ``request`` says ``HelperDied`` (what the
    guard turns into WorkerUnavailable) and ``stderr_tail`` answers "", where both raised
    ValueError("I/O operation on closed file") out of a scan thread."""
    w = HelperProcess("/")
    w.close()
    with pytest.raises(HelperDied):
        w.request("ping", {}, time.monotonic() + 5.0)
    assert w.stderr_tail() == ""
    assert wait_until(lambda: w.proc.poll() is not None)


# -- one helper per mount: its lanes are threads ----------------------------------------------


def _probe_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if LEFTOVER.match(n)]


def _long_probe(g: MountGuard, key: str, directory: str, outcome: list[BaseException]) -> None:
    """A probe that writes until its budget (a minute) is spent or it is interrupted."""
    try:
        g.call(
            key,
            "probe",
            lane=PROBE_LANE,
            timeout=90.0,
            directory=directory,
            writes=100000,
            block_bytes=512,
            budget_s=60,
            interval_s=0.02,
        )
    except BaseException as exc:  # reported by the test
        outcome.append(exc)


def test_a_watched_share_probing_has_one_helper_that_answers_the_looks(sshfs_mount) -> None:
    """Issue 33 item 3: a watched sshfs path cost a helper per lane (the look, the probe, the
    checkpoint scan). Now one process per mount serves every lane, and the per-tick statvfs
    and the scan's listing are answered while a slow probe is still writing."""
    key, remote = str(sshfs_mount.mountpoint), sshfs_mount.remote / "work"
    path = str(sshfs_mount.path)
    g = MountGuard(timeout_s=5.0)
    others = {p.pid for p in guard_helpers()}  # helpers of other guards in this process
    outcome: list[BaseException] = []
    prober = threading.Thread(target=_long_probe, args=(g, key, path, outcome))
    try:
        prober.start()
        assert wait_until(lambda: _probe_files(remote) != [])  # the probe is writing
        assert g.call(key, "statvfs", what="statvfs", path=path)
        sizes = path_look.file_sizes_guarded(g, key, path, DEFAULTS)
        assert [n for n in sizes if LEFTOVER.match(os.path.basename(n))]  # it lists the probe's
        assert _probe_files(remote) != [] and prober.is_alive()  # answered during the probe
        helpers = [p.pid for p in guard_helpers() if p.pid not in others]
        assert helpers == g.live_pids() and len(helpers) == 1
    finally:
        g.close()  # SIGTERM: the probe is interrupted and removes its file
        prober.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], WorkerUnavailable), outcome
    assert wait_until(lambda: not still_runs(helpers[0]))
    assert _probe_files(remote) == []


def test_a_look_that_times_out_beside_a_probe_leaves_no_probe_file(sshfs_mount) -> None:
    """The statvfs times out while the same helper is probing: the helper is stopped with
    SIGTERM, not SIGKILL, so once the share answers again the probe removes its file before
    the helper exits; until then the helper is the one stuck process of the mount."""
    key, remote = str(sshfs_mount.mountpoint), sshfs_mount.remote / "work"
    path = str(sshfs_mount.path)
    g = MountGuard(timeout_s=1.0)
    others = {p.pid for p in guard_helpers()}
    outcome: list[BaseException] = []
    prober = threading.Thread(target=_long_probe, args=(g, key, path, outcome))
    try:
        prober.start()
        assert wait_until(lambda: _probe_files(remote) != [])
        sshfs_mount.pause()
        with pytest.raises(MountUnresponsive, match=r"within 1\.0 s \(statvfs\)"):
            g.call(key, "statvfs", path=path)
        prober.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], MountUnresponsive), outcome
        stuck = g.stuck_pids(key)
        assert len(stuck) == 1
        assert [p.pid for p in guard_helpers() if p.pid not in others] == stuck
        assert _probe_files(remote) != []  # the write is stuck, so is its clean-up
        sshfs_mount.resume()
        assert wait_until(lambda: not g.is_stuck(key))
        assert _probe_files(remote) == []
    finally:
        sshfs_mount.resume()
        g.close()
        prober.join(30)


def test_a_scan_on_a_stuck_share_fails_at_once_and_starts_no_helper(sshfs_mount) -> None:
    """The checkpoint scan has a key of its own (a slow listing must not mark the mount
    unresponsive), but it runs in the mount's one helper: while the mount's look is stuck,
    the scan fails at once instead of starting a second helper to hang beside the first."""
    key, path = str(sshfs_mount.mountpoint), str(sshfs_mount.path)
    g = MountGuard(timeout_s=1.0)
    others = {p.pid for p in guard_helpers()}
    try:
        assert g.call(key, "statvfs", path=path)
        sshfs_mount.pause()
        with pytest.raises(MountUnresponsive) as first:
            g.call(key, "statvfs", path=path)
        stuck = g.stuck_pids(key)
        with pytest.raises(MountUnresponsive) as scan:
            path_look.file_sizes_guarded(g, key, path, DEFAULTS)
        assert scan.value.since == first.value.since  # the look's record, no new attempt
        assert [p.pid for p in guard_helpers() if p.pid not in others] == stuck
    finally:
        sshfs_mount.resume()
        g.close()


def test_helpers_given_up_leave_no_descriptor_behind(guard: MountGuard) -> None:
    """Each helper holds pipes (and a wake-up pipe for its waiting callers): a helper that
    timed out and then exited is forgotten with all of them closed."""

    def one_cycle() -> None:
        with pytest.raises(MountUnresponsive):
            guard.call("/z", "sleep", timeout=0.3, seconds=60)
        assert wait_until(lambda: not guard.is_stuck("/z"))
        guard.call("/z", "ping")

    one_cycle()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        one_cycle()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_short_call_behind_a_long_one_waits_at_most_its_own_time_twice() -> None:
    """A caller with a 0.2 s timeout behind a call of 60 s on the same lane (a `check
    ?timeout=60` beside `locate`, on a kernel's main thread documented as "at most 1 s")
    waited for the whole 60 s; it waits its own time for the call before it, then gives up.
    The holder is still within its time: the lane is busy, the mount is not stuck."""
    from trainwatch_lab.core.guard.guard import _take
    from trainwatch_lab.core.guard.helper import Lane

    lane = Lane()
    lane.lock.acquire()
    lane.until = time.monotonic() + 60.0  # a long call holds it, within its time
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(_take(lane, time.monotonic() + 0.2, 0.2)))
    waiter.start()
    waiter.join(timeout=30)  # far past 0.4 s, far short of 60 s
    alive = waiter.is_alive()
    lane.lock.release()
    waiter.join()
    assert not alive and got == [False]
