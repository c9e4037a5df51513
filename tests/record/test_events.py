"""Events from consecutive samples: warnings raised and cleared, processes seen and ended
(a real process), checkpoints, mount changes, kernels started, restarted and ended."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.model import Alert, CheckpointInfo, PathState, Sample, TrainingProcess
from trainwatch_lab.core.record import ended
from trainwatch_lab.core.record.events import EventWatch

ALERT = Alert("disk-filling", "warning", "/data", "/data fills in 20 min", "free space")


def _kinds(events: list) -> list[str]:
    return [e.kind for e in events]


def test_warnings_raised_once_and_cleared_with_their_text() -> None:
    watch = EventWatch()
    first = watch.observe(Sample(t=1.0, warnings=[ALERT]))
    assert _kinds(first) == ["warning-raised"]
    assert first[0].text == "disk-filling: /data fills in 20 min" and first[0].subject == "/data"
    assert watch.observe(Sample(t=2.0, warnings=[ALERT])) == []
    assert _kinds(watch.observe(Sample(t=3.0))) == ["warning-cleared"]


def test_a_process_is_seen_then_ended_with_its_stderr_tail(tmp_path) -> None:
    err = tmp_path / "nohup.out"
    with open(err, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys,time; print('dying', file=sys.stderr, flush=True); time.sleep(60)",
            ],
            stderr=out,
        )
    try:
        assert wait_until(lambda: err.read_bytes() != b"", timeout=30)
        row = TrainingProcess(
            pid=proc.pid,
            command="python train.py --lr 3",
            cwd="/",
            reasons=["gpu"],
            paths={"/data": []},
        )
        watch = EventWatch()
        seen = watch.observe(Sample(t=1.0, processes=[row]))
        assert _kinds(seen) == ["process-seen"] and seen[0].subject == "train.py"
        assert seen[0].data["stderr"] == str(err) and seen[0].data["started"] > 0
        assert watch.observe(Sample(t=2.0)) == []  # unlisted but alive: no end
    finally:
        proc.kill()
        proc.wait()
    ended = watch.observe(Sample(t=3.0))
    assert _kinds(ended) == ["process-ended"]
    assert ended[0].data["stderr_tail"] == ["dying"] and ended[0].data["paths"] == ["/data"]


def test_checkpoints_mounts_and_kernels() -> None:
    watch = EventWatch()

    def sample(t: float, mtime: float, fstype: str, kernels: dict) -> Sample:
        ck = CheckpointInfo(1, "/ck/a.pt", 2 << 20, mtime, None)
        path = PathState(
            "/ck", exists=True, mountpoint="/ck", fstype=fstype, source="s", checkpoints=ck
        )
        return Sample(t=t, paths={"/ck": path}, kernels=kernels)

    assert _kinds(watch.observe(sample(1, 10.0, "ext4", {"k1": {"pid": 5, "name": "py"}}))) == [
        "kernel-started"
    ]
    events = watch.observe(sample(2, 11.0, "nfs4", {"k1": {"pid": 6, "name": "py"}}))
    assert _kinds(events) == ["mount-changed", "checkpoint", "kernel-ended", "kernel-restarted"]
    assert events[2].data["pid"] == 5 and events[3].data == {"pid": 6, "was": 5}
    assert "was ext4 s" in events[0].text and "/ck/a.pt (2.0 MiB)" in events[1].text
    assert _kinds(watch.observe(sample(3, 11.0, "nfs4", {}))) == ["kernel-ended"]


def test_a_kernel_is_named_by_its_notebook_even_one_that_came_after_it() -> None:
    """A kernel that ends at night is "kernel python3 of runs/train.ipynb", the notebook its
    session served; a session made (or renamed) after its kernel started names its end."""
    watch = EventWatch()
    kernel = {"pid": 5, "name": "python3"}
    (started,) = watch.observe(Sample(t=1.0, kernels={"k1": kernel}))
    assert started.text == "kernel python3 started" and "notebook" not in started.data
    assert watch.observe(Sample(t=2.0, kernels={"k1": {**kernel, "notebook": "a.ipynb"}})) == []
    moved = {**kernel, "notebook": "runs/train.ipynb"}  # renamed in the file browser
    assert watch.observe(Sample(t=3.0, kernels={"k1": moved})) == []
    (end,) = watch.observe(Sample(t=4.0))
    assert end.subject == "kernel python3 of runs/train.ipynb"
    assert end.text.startswith("kernel python3 of runs/train.ipynb (pid 5) ended")
    assert end.data["notebook"] == "runs/train.ipynb"
    (again,) = watch.observe(Sample(t=5.0, kernels={"k2": {**moved, "pid": 7}}))
    assert again.text == "kernel python3 of runs/train.ipynb started"
    assert again.data["notebook"] == "runs/train.ipynb"


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_kernel_s_stderr_shared_with_the_recorder_is_not_its_own(tmp_path) -> None:
    """A Jupyter server's kernels inherit its stderr: a regular file here (the server's
    log) holds the server's lines, never the kernel's, so nothing of it is quoted."""
    log = tmp_path / "server.log"
    saved = os.dup(2)
    with open(log, "ab") as fh:
        os.dup2(fh.fileno(), 2)  # this process is the recorder: its stderr is the log
    kernel = None
    try:
        kernel = subprocess.Popen(SLEEPER)  # inherits it, as a kernel does
        watch = EventWatch()
        started = watch.observe(Sample(t=1.0, kernels={"k1": {"pid": kernel.pid, "name": "py"}}))
        assert _kinds(started) == ["kernel-started"]
        assert watch.kernels["k1"]["stderr"] is None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if kernel is not None:
            kernel.kill()
            kernel.wait()
    log.write_text("[W 03:12:07 ServerApp] AsyncIOLoopKernelRestarter: restarting kernel\n")
    (end,) = watch.observe(Sample(t=2.0))
    assert end.kind == "kernel-ended" and "stderr_tail" not in end.data


def test_a_log_other_processes_write_too_is_not_a_run_s_own(tmp_path) -> None:
    """Two unrelated scripts appending to one file: its last lines may be the other's; a
    terminal is no file; a script and its own children (DataLoader workers) writing
    nohup.out keep it."""
    shared = tmp_path / "all.log"
    with open(shared, "ab") as out:
        a = subprocess.Popen(SLEEPER, stderr=out)
        b = subprocess.Popen(SLEEPER, stderr=out)
    master, slave = os.openpty()  # a terminal: the lines on it are nobody's file
    term = subprocess.Popen(SLEEPER, stderr=slave)
    os.close(slave)
    own = tmp_path / "nohup.out"
    with open(own, "ab") as out:
        spawn = (
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)"
        )
        parent = subprocess.Popen([sys.executable, "-c", spawn], stderr=out)
    try:
        assert wait_until(lambda: len(_children(parent.pid)) == 1, timeout=30)
        assert ended.stderr_file(a.pid) == str(shared)  # a regular local file all the same
        rows = [
            TrainingProcess(pid=p.pid, command="python train.py", cwd="/", reasons=["gpu"])
            for p in (a, b, term, parent)
        ]
        seen = EventWatch().observe(Sample(t=1.0, processes=rows))
        assert [e.data["stderr"] for e in seen] == [None, None, None, str(own)]
    finally:
        for proc in (a, b, term, parent):
            proc.kill()
            proc.wait()
        os.close(master)


def _children(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return fh.read().split()
    except OSError:
        return []


@pytest.mark.parametrize("swap", ["fifo", "symlink", "hard-link"])
def test_a_stderr_file_swapped_before_the_end_is_never_read_nor_waited_on(
    tmp_path: Path, swap: str
) -> None:
    """The recorder (root, in the server or the agent) reads a process's stderr tail when it
    ends, by its path: the user may have put something else there by then. A FIFO held the
    sampler thread for ever; a symlink had root copy another file's last lines (here a
    stand-in for /etc/shadow) into the history; so did a hard link to it (where the
    kernel's protected_hardlinks is off). Only the file the process had open is read."""
    err, secret = tmp_path / "err.log", tmp_path / "secret"
    secret.write_text("root:$6$not-for-the-history\n")
    with open(err, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys,time; print('dying', file=sys.stderr, flush=True); time.sleep(60)",
            ],
            stderr=out,
        )
    try:
        assert wait_until(lambda: err.read_bytes() != b"", timeout=30)
        seen = ended.at_start(proc.pid)
        assert seen["stderr"] == str(err)
    finally:
        proc.kill()
        proc.wait()
    err.unlink()
    if swap == "fifo":
        os.mkfifo(err)
    elif swap == "symlink":
        err.symlink_to(secret)
    else:
        os.link(secret, err)
    done: list[dict] = []
    reader = threading.Thread(target=lambda: done.append(ended.at_end({**seen, "pid": proc.pid})))
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # unblock the FIFO's open so the test can end
        with open(err, "wb"):
            pass
        reader.join()
        raise AssertionError("at_end waited on a FIFO put where the stderr file was")
    assert "stderr_tail" not in done[0], done[0]
