"""How runs end, for real, into a store: a script dying of a full disk on a loop ext4 under
``watch --record``, and a memory cgroup for OOM kills. Shared by the tests of ``why``
(tests/record/test_why.py) and of the notebook's replay
(tests/notebook/dashboard/test_replay.py)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.env import need, need_root
from tests.support.mounts import wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "trainwatch_lab"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
# allocates far more than the cgroup's 64 MiB after a pause (to be seen alive first)
HOG = "import time; time.sleep({}); x = bytearray(512 << 20); time.sleep(5)"


def history(store: Path, *args: str) -> str:
    """``trainwatch-lab history ARGS --store STORE``'s output (it must succeed)."""
    done = subprocess.run(
        [*CLI, "history", *args, "--store", str(store)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextlib.contextmanager
def recording_watch(store: Path, mountpoint: Path, cwd: Path) -> Iterator[subprocess.Popen]:
    """``watch --processes --record`` of ``mountpoint`` into ``store`` (ticks and flushes
    every 0.5 s), SIGKILLed on the way out: the recorder dies, and history is then read by
    another process, as after a crash."""
    watch = subprocess.Popen(
        [
            *CLI,
            *("watch", "--processes", "--interval", "0.5", "--record", "--record-every", "0.5"),
            *("--store", str(store), "--json", str(mountpoint)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=cwd,
    )
    try:
        yield watch
    finally:
        watch.send_signal(signal.SIGKILL)
        watch.wait(timeout=30)


def record_full_disk(store: Path, mountpoint: Path, cwd: Path, wrapped: bool = False) -> int:
    """``tests/record/train_until_full.py`` under nohup fills ``mountpoint`` and dies of
    Errno 28 while ``watch --record`` records into ``store``; the recorder is SIGKILLed
    once it recorded the end. Returns the script's pid."""
    with recording_watch(store, mountpoint, cwd):
        script = [sys.executable, str(ROOT / "tests/record/train_until_full.py"), str(mountpoint)]
        script.append("8")
        if wrapped:
            script = [*CLI, "run", "--store", str(store), "--", *script]
        with open(cwd / "nohup.out", "wb") as out:
            train = subprocess.Popen(
                script, stdout=out, stderr=out, env=ENV, cwd=cwd, start_new_session=True
            )
            train.wait(timeout=120)
        assert b"Errno 28" in (cwd / "nohup.out").read_bytes()
        assert train.returncode == 1
        pid = train.pid
        if wrapped:  # the script is the wrapper's child
            pid = int(re.search(r"pid (\d+)\) started", history(store, "events")).group(1))

        def ended_seen() -> bool:  # the recorder noticed the end (flushed in at most 10 s)
            try:
                events = history(store, "events", "--format", "csv")
            except AssertionError:
                return False
            return f"process-ended,train_until_full.py,train_until_full.py (pid {pid}) ended" in (
                events
            )

        assert wait_until(ended_seen, timeout=60)
    return pid


PLAIN_SCRIPT = str(ROOT / "tests/record/save_only.py")


def _nohup(mode: str, directory: Path, cwd: Path) -> subprocess.Popen:
    """``nohup python save_only.py DIR MODE &``: its own session, output appended."""
    with open(cwd / "nohup.out", "ab") as out:
        return subprocess.Popen(
            [sys.executable, PLAIN_SCRIPT, str(directory), mode],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=cwd,
            env=ENV,
            start_new_session=True,
        )


def plain_script_endings(
    events: Callable[[], str], mountpoint: Path, cwd: Path, timeout: float = 90.0
) -> dict[str, int]:
    """tests/record/save_only.py (no TensorBoard, no GPU, like nohup) three times into
    ``mountpoint`` while a recorder watches it: killed with SIGKILL once it was seen, exit 0,
    and dying of Errno 28 on the full disk. ``events()``: the recorded events' text (the
    CSV of `history events`, or the server's). Returns the pids by ending, once each end
    was recorded."""
    seen = lambda pid: f"save_only.py (pid {pid}) is training" in events()  # noqa: E731
    ended = lambda pid: f"save_only.py (pid {pid}) ended" in events()  # noqa: E731
    pids = {}
    killed = _nohup("forever", mountpoint, cwd)
    pids["killed"] = killed.pid
    try:
        assert wait_until(lambda: seen(killed.pid), timeout=timeout), events()
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    (mountpoint / "state.npy").unlink()
    clean = _nohup("exit0", mountpoint, cwd)
    pids["clean"] = clean.pid
    assert clean.wait(timeout=120) == 0
    full = _nohup("full", mountpoint, cwd)
    pids["full"] = full.pid
    assert full.wait(timeout=180) == 1
    assert b"Errno 28" in (cwd / "nohup.out").read_bytes()
    for pid in pids.values():
        assert wait_until(lambda p=pid: ended(p), timeout=timeout), (pid, events())
    return pids


def store_events(store: Path) -> Callable[[], str]:
    """The recorded events of ``store`` as `history events --format csv` prints them."""

    def read() -> str:
        try:
            return history(store, "events", "--format", "csv")
        except AssertionError:  # the store is being created
            return ""

    return read


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    """A memory cgroup (v1 where mounted, else v2) limited to 64 MiB with no swap."""
    need_root()
    base = Path("/sys/fs/cgroup/memory")
    v2 = not base.is_dir()
    controllers = Path("/sys/fs/cgroup/cgroup.subtree_control")
    need(not v2 or "memory" in controllers.read_text().split(), "needs the memory controller")
    group = (Path("/sys/fs/cgroup") if v2 else base) / f"trainwatch-test-{os.getpid()}"
    group.mkdir()
    try:
        if v2:
            (group / "memory.max").write_text(str(64 << 20))
            (group / "memory.swap.max").write_text("0")
        else:
            (group / "memory.limit_in_bytes").write_text(str(64 << 20))
            (group / "memory.swappiness").write_text("0")
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
