"""The whole story, for real. Stall: a training loop blocks on an sshfs mount whose server is
paused, the (fake) GPU drops to 0 % with memory held by that process, and the monitor running inside
the same process says so - `gpu-stalled`, naming the mount and the write it is stuck in.

Everything is real except the GPU: a real sshd/sftp-server/sshfs mount (tests/support/mounts.py),
the real pynvml bindings over the fake libnvidia-ml.so.1, the product's ``make_sampler`` with
all sources and the default Advisor. The process runs as a subprocess so that its main thread
can really block in the kernel; it reports every sample as a JSON line in a local file.

Starvation on real workloads (storage-bound against CPU-bound loaders) is scored in
tests/precision/test_gpu_feed.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.core.fake_nvml import GIB, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from tests.support.env import need_root, need_tool
from trainwatch_lab.core.defaults import DEFAULTS

__all__ = ["fake_nvml", "fake_nvml_lib"]

# The "training script": its file is called event_file_writer.py and the blocking call sits
# in flush(), like TensorBoard's writer, so the message shows what a user would see.
TRAINING = r"""
import dataclasses, json, os, sys, time
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.monitor import make_sampler

logdir, out_path, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
defaults = dataclasses.replace(DEFAULTS, **overrides)
sampler = make_sampler([logdir], pid=os.getpid(), interval=0.5, defaults=defaults)
out = open(out_path, "a", buffering=1)

def report(sample):
    out.write(json.dumps(sample.to_json()) + "\n")

sampler.subscribe(report)
sampler.start()

def flush(f):
    f.write(b"x" * 4096)
    f.flush()
    os.fsync(f.fileno())

with open(os.path.join(logdir, "events.out.tfevents.1700000000.host"), "ab") as f:
    while True:  # the training loop: one log record per step
        flush(f)
        time.sleep(0.05)
"""

OVERRIDES = {
    "gpu_stalled_for_s": 3.0,
    "gpu_processes_every_s": 0.5,
    "mount_timeout_s": 1.0,
    "probe_every_s": 3600.0,
}


def read_samples(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for(path: Path, predicate, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for sample in reversed(read_samples(path)):
            if predicate(sample):
                return sample
        time.sleep(0.25)
    return None


def stop_group(child: subprocess.Popen[str]) -> str:
    """Kill a child started with ``start_new_session`` and all it started; its stderr."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    if child.stderr is None:
        return ""
    err = child.stderr.read()
    child.stderr.close()
    return err


def codes(sample: dict[str, Any]) -> set[str]:
    return {w["code"] for w in sample["warnings"]}


def test_gpu_stalled_names_the_paused_sshfs_mount(
    sshfs_mount, fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    need_root()
    need_tool("sshfs")
    logdir = str(sshfs_mount.path)
    script = tmp_path / "event_file_writer.py"
    script.write_text(TRAINING)
    out = tmp_path / "samples.jsonl"
    fake_nvml.write([gpu(0, util=85)])
    env = fake_nvml.env()
    assert dataclasses.replace(DEFAULTS, **OVERRIDES)  # the overrides are real Defaults fields
    child = subprocess.Popen(
        [sys.executable, str(script), logdir, str(out), json.dumps(OVERRIDES)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # the GPU is busy and 3 GiB of it belong to the training process
        fake_nvml.write([gpu(0, util=85, procs={child.pid: 3 * GIB})])
        healthy = wait_for(
            out,
            lambda s: s["gpus"] and s["gpus"][0]["process_mem_bytes"] == 3 * GIB,
            timeout=30,
        )
        assert healthy is not None, f"no healthy sample; child stderr: {child.stderr}"
        assert "gpu-stalled" not in codes(healthy)
        assert logdir in healthy["paths"] and healthy["paths"][logdir]["fstype"] == "fuse.sshfs"

        # the server stops answering; the loop blocks; the GPU goes idle, memory still held
        sshfs_mount.pause()
        fake_nvml.write([gpu(0, util=0, procs={child.pid: 3 * GIB})])
        stalled = wait_for(out, lambda s: "gpu-stalled" in codes(s), timeout=40)
        assert stalled is not None, "gpu-stalled never fired"
    finally:
        sshfs_mount.resume()
        err = stop_group(child)
    assert "Traceback" not in err, err

    alert = next(w for w in stalled["warnings"] if w["code"] == "gpu-stalled")
    assert alert["subject"] == "GPU 0" and alert["severity"] == "warning"
    message = alert["message"]
    assert message.startswith(f"The training process (pid {child.pid}) holds 3 GiB on GPU 0 at 0 %")
    assert f"{logdir} is on fuse.sshfs" in message
    # the monitor saw where the training loop is stuck: in flush(), on the file on the mount
    assert "the training loop is blocked in event_file_writer.py:flush " in message
    assert f"{logdir}/events.out.tfevents" in message and "(fuse.sshfs)" in message
    main = stalled["process"]["main_thread"]
    assert main["function"] == "flush" and main["fd_path"].startswith(logdir)
    assert main["syscall"] in {"write", "fsync", "close"}
    assert "local disk" in alert["fix"]
    print(message, alert["fix"], sep="\n")
