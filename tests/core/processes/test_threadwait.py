"""Where the main thread waits: parsing, and a real main thread blocked in a write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from trainwatch_lab.core.model import ProcessIO, Sample
from trainwatch_lab.core.processes.threadwait import MainThreadSource, decode_syscall, task_state

ROOT = Path(__file__).resolve().parents[3]


def test_task_state_survives_odd_command_names() -> None:
    assert task_state("1234 (python) S 1 1234 1234 0") == "S"
    assert task_state("1234 (a) b) D 1 1234") == "D"
    assert task_state("garbage") is None


def test_decode_syscall() -> None:
    assert decode_syscall("1 0x7 0x55d0 0x10 0x0 0x0 0x0 0x7ffd 0x7f12", "x86_64") == ("write", 7)
    assert decode_syscall("74 0x3 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f12", "x86_64") == ("fsync", 3)
    assert decode_syscall("64 0x5 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f12", "aarch64") == ("write", 5)
    assert decode_syscall("running") == (None, None)
    assert decode_syscall("-1 0x7ffd 0x7f12") == (None, None)
    assert decode_syscall("") == (None, None)
    assert decode_syscall("202 0x1 0x2", "x86_64") == ("syscall 202", None)  # futex: no fd


def test_source_ignores_other_processes_and_missing_process() -> None:
    src = MainThreadSource()
    empty = Sample(t=0)
    src.collect(empty)
    assert empty.process is None
    other = Sample(t=0, process=ProcessIO(os.getpid() + 1, 1, 0, 0, 0, 0))
    src.collect(other)
    assert other.process is not None and other.process.main_thread is None


BLOCKED_WRITER = r"""
import json, os, sys, threading, time
from trainwatch_lab.core.model import ProcessIO, Sample
from trainwatch_lab.core.processes.threadwait import MainThreadSource

r, w = os.pipe()

def look():
    time.sleep(0.5)  # let the main thread fill the pipe and block
    sample = Sample(t=0, process=ProcessIO(os.getpid(), 1, 0, 0, 0, 0))
    MainThreadSource().collect(sample)
    info = dict(sample.process.main_thread, pipe=os.readlink(f"/proc/self/fd/{w}"))
    print(json.dumps(info), flush=True)
    os._exit(0)

def flush_events(fd):
    os.write(fd, b"x" * (1 << 20))  # a pipe holds 64 KiB: this blocks

threading.Thread(target=look, daemon=True).start()
flush_events(w)
"""


def test_real_main_thread_blocked_writing() -> None:
    out = subprocess.run(
        [sys.executable, "-c", BLOCKED_WRITER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["function"] == "flush_events"
    assert info["file"] == "<string>" and info["line"] == 17
    assert info["state"] == "S"  # a pipe write sleeps interruptibly
    assert info["syscall"] == "write"
    assert info["fd_path"] == info["pipe"] and info["fd_path"].startswith("pipe:[")
    assert info["wchan"] is None or "pipe_write" in info["wchan"]  # hidden without kallsyms


def test_with_a_gpu_threshold_it_looks_only_while_a_gpu_idles() -> None:
    """In the sampler it explains an idle GPU: with no GPU, or only busy ones, it reads
    nothing; one idle GPU among busy ones is enough."""
    from trainwatch_lab.core.model import GpuState

    def gpu(index: int, util: float | None) -> GpuState:
        return GpuState(index, index, f"GPU-{index}", "fake", util_pct=util)

    src = MainThreadSource(gpu_idle_below=5.0)
    for gpus, looked in [
        ([], False),
        ([gpu(0, 97.0)], False),
        ([gpu(0, None)], False),  # utilization not supported: nothing to explain
        ([gpu(0, 97.0), gpu(1, 0.0)], True),
    ]:
        sample = Sample(t=0, process=ProcessIO(os.getpid(), 1, 0, 0, 0, 0), gpus=gpus)
        sampler = threading.Thread(target=src.collect, args=(sample,))  # as the sampler does
        sampler.start()
        sampler.join()
        assert sample.process is not None
        assert (sample.process.main_thread is not None) is looked, gpus
