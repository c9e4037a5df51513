"""Process discovery (core.processes.discovery, core.processes.source) on real processes: scripts
that
write event files and checkpoints, a DataLoader-like worker, a process that ends, and a scan
run as another user (setpriv) that leaves root's processes alone."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import need, need_root
from tests.support.mounts import wait_until
from trainwatch_lab.core.model import GpuState, PathState, Sample
from trainwatch_lab.core.processes.discovery import (
    Found,
    Scanner,
    file_kind,
    label,
    opened_for_writing,
    process_identity,
    scan,
    short_command,
    status_uid,
)
from trainwatch_lab.core.processes.source import FollowPaths, TrainingSource, gpu_indices
from trainwatch_lab.core.processes.threadwait import task_wait

ROOT = Path(__file__).resolve().parents[3]
SETPRIV = shutil.which("setpriv") or "setpriv"
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by every user (ours may live under /root)

# A "training script": opens its event file (or checkpoint) as asked, says so, then sleeps.
WRITER = r"""
import os, sys, time
path, mode = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(path), exist_ok=True)
if mode == "r":
    open(path, "ab").close()
f = open(path, mode + "b")
if len(sys.argv) > 3:  # a DataLoader-like worker with the file inherited
    import subprocess
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=())
print("ready", flush=True)
time.sleep(60)
"""


@contextlib.contextmanager
def writer(path: Path, mode: str = "a", *extra: str, user: str | None = None) -> Iterator[int]:
    """A process holding ``path`` open (mode a: writing, r: reading); yields its pid."""
    cmd = [sys.executable, "-c", WRITER, str(path), mode, *extra]
    if user is not None:
        cmd = [SETPRIV, *user_args(user), SYSTEM_PYTHON, *cmd[1:]]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(10)


# -- pure parsing ----------------------------------------------------------------------------
def test_the_small_parsers() -> None:
    assert status_uid("Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n") == 1000
    assert status_uid("Name:\tx\n") is None
    assert opened_for_writing("pos:\t0\nflags:\t0100001\nmnt_id:\t25\n")  # O_WRONLY
    assert opened_for_writing("flags:\t02100002\n")  # O_RDWR
    assert not opened_for_writing("pos:\t0\nflags:\t0100000\n")  # O_RDONLY
    assert not opened_for_writing("garbage")
    assert file_kind("/runs/a/events.out.tfevents.1700000000.host.1.0") == "event file"
    assert file_kind("/ckpt/epoch=3-step=900.ckpt") == "checkpoint"
    assert file_kind("/ckpt/model.safetensors (deleted)") is None
    assert file_kind("pipe:[1234]") is None and file_kind("/data/shard.tar") is None
    assert short_command(["/usr/bin/python3", "/home/a/train.py", "--lr", "3e-4"]) == (
        "python3 train.py --lr 3e-4"
    )
    assert short_command(["torchrun", "--nproc-per-node=8", "/x/y/train.py"]) == (
        "torchrun --nproc-per-node=8 train.py"
    )
    long = short_command(["python", "x" * 100])
    assert len(long) == 60 and long.endswith("…")
    assert short_command(["python", "a\nb"]) == "python a?b" and short_command([]) == "?"
    assert label(4242, "python train.py", "event file") == (
        "pid 4242 `python train.py`, event file"
    )


def test_gpu_indices_from_device_files_or_the_only_gpu() -> None:
    gpus = [GpuState(index=i, nvml_index=i + 1, uuid=f"u{i}", name="g") for i in range(2)]
    found = Found(1, 1, 0, ["python"], None, {"gpu"}, gpu_minors={2})
    assert gpu_indices(found, gpus, held=True) == [1]  # /dev/nvidia2 is NVML's index 2
    bare = Found(1, 1, 0, ["python"], None, {"gpu"})
    assert gpu_indices(bare, gpus, held=True) is None  # where: unknown with two GPUs
    assert gpu_indices(bare, gpus[:1], held=True) == [0]
    assert gpu_indices(bare, gpus, held=False) == []


# -- scans of real processes ------------------------------------------------------------------
def test_a_script_writing_an_event_file_is_found_a_reader_is_not(tmp_path: Path) -> None:
    event = tmp_path / "runs" / "exp1" / "events.out.tfevents.1700000000.host"
    ckpt = tmp_path / "ckpt" / "last.ckpt"
    with writer(event) as pid, writer(ckpt, "r") as reader, writer(ckpt.with_name("w.pt")) as w:
        result = scan()
        found = result.found[pid]
        assert found.reasons == {"event file"}
        assert found.event_dirs == [str(event.parent)] and found.checkpoint_dirs == []
        assert found.cwd == os.getcwd() and "-c" in found.argv
        assert found.key == process_identity(pid)
        assert reader not in result.found  # a checkpoint open for reading: no training
        assert result.found[w].reasons == {"checkpoint"}
        assert result.found[w].checkpoint_dirs == [str(ckpt.parent)]
        assert os.getpid() not in result.looked_at  # never ourselves


def test_gpu_holders_workers_and_skipped_trees(tmp_path: Path) -> None:
    event = tmp_path / "events.out.tfevents.1"
    with writer(event, "a", "worker") as pid:
        assert wait_until(lambda: len(_children(pid)) == 1, 10)
        (worker,) = _children(pid)
        # NVML says the worker holds GPU memory: it is folded into its script
        found = scan(holders={worker}).found
        assert worker not in found and found[pid].reasons == {"gpu", "event file"}
        assert found[pid].members == {pid, worker}
        # a kernel's tree is the kernels source's business
        assert pid not in scan(holders={worker}, skip_trees={pid}).found
        assert pid in scan(skip_trees={worker}).found


SWAP = r"""
import os, sys
keep = os.open(os.devnull, os.O_RDONLY)  # one descriptor, on a file that does not count
print(keep, flush=True)
sys.stdin.readline()  # then the same number, now on an event file opened for writing
new = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.dup2(new, keep)
os.close(new)
print("swapped", flush=True)
sys.stdin.readline()
"""


def test_a_scanner_reads_new_descriptors_each_pass_and_every_link_on_full_passes(
    tmp_path: Path,
) -> None:
    event = tmp_path / "events.out.tfevents.1"
    proc = subprocess.Popen(
        [sys.executable, "-c", SWAP, str(event)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdout.readline()
        scanner = Scanner(full_every=3)
        assert proc.pid not in scanner.scan().found  # pass 0: full
        proc.stdin.write("swap\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "swapped"
        # the same descriptor number, another file: incremental passes keep the old link ...
        assert proc.pid not in scanner.scan().found and proc.pid not in scanner.scan().found
        # ... until the next full pass reads every link again
        assert scanner.scan().found[proc.pid].event_dirs == [str(tmp_path)]
        with writer(tmp_path / "new" / "events.out.tfevents.2") as late:
            assert late in scanner.scan().found  # a new process (new descriptors): at once
    finally:
        proc.kill()
        proc.wait()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def test_task_wait_names_the_call_and_the_file() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        assert wait_until(lambda: (task_wait(proc.pid) or {}).get("syscall") == "read", 10)
        info = task_wait(proc.pid)
        assert info is not None and info["blocked"] and info["state"] == "S"
        assert info["fd_path"].startswith("pipe:[")
    finally:
        proc.kill()
        proc.wait()
    assert task_wait(proc.pid) is None  # gone


# -- the source -------------------------------------------------------------------------------
class Paths:
    """What TrainingSource's FollowPaths calls on the paths source."""

    def __init__(self, *keys: str) -> None:
        self.keys = set(keys)
        self.owners: dict[str, int | None] = {}

    def add(self, path: str, owner: int | None = None) -> str:
        self.keys.add(path)
        self.owners[path] = owner
        return path

    def remove(self, path: str) -> None:
        self.keys.discard(path)


def _tick(source: TrainingSource, paths: Paths) -> Sample:
    sample = Sample(t=time.time())
    sample.paths = {k: PathState(path=k) for k in paths.keys}
    source.collect(sample)
    return sample


def test_the_source_lists_labels_and_lets_go_of_an_ended_process(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    paths = Paths(str(tmp_path))  # watched by the user: never removed
    source = TrainingSource(every_s=0.2, on_paths=FollowPaths(paths, [str(tmp_path)]))
    try:
        with writer(logdir / "events.out.tfevents.9") as pid:

            def listed() -> Sample | None:
                sample = _tick(source, paths)
                rows = [p for p in sample.processes if p.pid == pid]
                return sample if rows and str(logdir) in sample.paths else None

            assert wait_until(listed, 15)
            sample = listed()
            assert sample is not None
            row = next(p for p in sample.processes if p.pid == pid)
            assert row.reasons == ["event file"] and row.gpu_mem_bytes is None
            assert row.io is not None and row.main_thread is not None
            want = f"pid {pid} `{row.command}`, event file"
            assert row.paths[str(logdir)] == [want]
            assert sample.paths[str(logdir)].labels == [want]
            assert str(logdir) in paths.keys and os.getcwd() in paths.keys
            assert paths.owners[str(logdir)] == pid  # its writes: its quota (issue 17)
            assert json.dumps(sample.to_json()["processes"])
        # it ended: the row goes at once, its directories with it, the user's path stays
        sample = _tick(source, paths)
        assert pid not in {p.pid for p in sample.processes}
        assert str(logdir) not in paths.keys and str(tmp_path) in paths.keys
    finally:
        source.close()
    assert source.passes >= 1 and source.cpu_s > 0


def test_a_process_found_before_it_was_known_as_a_kernel_leaves_the_list(tmp_path: Path) -> None:
    """A kernel started writing event files before the server's kernel manager listed its
    pid: discovery found it as a training process. Once the kernels source owns that pid
    (skip_trees), it leaves the training list, its workers' tree with it, though it lives on."""
    kernels: set[int] = set()
    source = TrainingSource(every_s=0.2, skip_trees=lambda: kernels)
    try:
        with writer(tmp_path / "events.out.tfevents.1", "a", "worker") as pid:
            assert wait_until(lambda: pid in {p.pid for p in _tick(source, Paths()).processes}, 15)
            kernels.add(pid)
            passes = source.passes
            assert wait_until(lambda: source.passes > passes + 1, 15)
            assert pid not in {p.pid for p in _tick(source, Paths()).processes}
    finally:
        source.close()


def test_hidden_processes_and_the_limits(tmp_path: Path) -> None:
    hidden: set[tuple[int, int]] = set()
    source = TrainingSource(every_s=0.2, hidden=lambda: hidden, max_processes=1, max_paths=1)
    try:
        with (
            writer(tmp_path / "a" / "events.out.tfevents.1") as a,
            writer(tmp_path / "b" / "events.out.tfevents.1") as b,
        ):
            paths = Paths()

            def ours() -> list[int]:
                return [p.pid for p in _tick(source, paths).processes if p.pid in (a, b)]

            _tick(source, paths)  # the first tick starts the discovery thread
            assert wait_until(lambda: source.passes >= 2, 10)
            rows = _tick(source, paths).processes
            assert len(rows) == 1 and sum(len(r.paths) for r in rows) == 1
            hidden.update(k for k in (process_identity(a), process_identity(b)) if k)
            assert ours() == []
    finally:
        source.close()


# -- another user -----------------------------------------------------------------------------
NOBODY = 65534


def user_args(user: str) -> list[str]:
    assert user == "nobody"
    return [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


SCAN = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from trainwatch_lab.core.processes.discovery import scan
r = scan()
print(json.dumps({"found": sorted(r.found), "looked_at": sorted(r.looked_at),
                  "other_users": r.other_users}))
"""


def test_a_scan_that_is_not_root_leaves_other_users_alone() -> None:
    need_root()
    need(os.access(SETPRIV, os.X_OK), "needs setpriv (util-linux)")
    need(os.access(SYSTEM_PYTHON, os.X_OK), f"needs {SYSTEM_PYTHON}")
    shared = Path(tempfile.mkdtemp(prefix="tw-users-"))
    try:
        shared.chmod(0o777)
        theirs = shared / "nobody" / "events.out.tfevents.1"
        mine = shared / "root" / "events.out.tfevents.1"
        with writer(mine) as root_pid, writer(theirs, user="nobody") as nobody_pid:
            assert root_pid in scan().found and nobody_pid in scan().found  # root: all
            out = subprocess.run(
                [SETPRIV, *user_args("nobody"), SYSTEM_PYTHON, "-c", SCAN, str(ROOT)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
            assert out.returncode == 0, out.stderr
            seen = json.loads(out.stdout)
        assert nobody_pid in seen["found"] and root_pid not in seen["found"]
        # not looked at: its descriptors were never read, only its owner
        assert root_pid not in seen["looked_at"] and seen["other_users"] > 0
        assert nobody_pid in seen["looked_at"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_stray_threads() -> Iterator[None]:
    yield
    import threading

    assert not [t for t in threading.enumerate() if t.name == "trainwatch-discover"]
