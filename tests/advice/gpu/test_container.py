"""Issue 16 item 1: a container. The training loop runs in its own PID namespace (``unshare
--pid --fork --mount-proc``), so the PIDs the fake NVML reports (the host's, as the real driver
does) do not exist where the monitor looks; its ``/dev/nvidia0`` (a file on a tmpfs mounted over
``/dev`` in its private mount namespace) is what ties it to the GPU. A paused sshfs share still
ends in ``gpu-stalled``, and ``notes`` says how the memory was attributed.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.advice.gpu.test_stall import (
    OVERRIDES,
    TRAINING,
    codes,
    read_samples,
    stop_group,
    wait_for,
)
from tests.core.fake_nvml import GIB, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from tests.support.env import need_root, need_tool

__all__ = ["fake_nvml", "fake_nvml_lib"]

# CUDA opens the device file when it creates a context and keeps it open
CONTAINER_TRAINING = 'gpu_device = open("/dev/nvidia0", "rb")\n' + TRAINING

# a private /dev with what Python needs and the GPU's device file (a plain file here)
SETUP = "mount -t tmpfs -o size=1m tmpfs /dev && mknod -m 666 /dev/null c 1 3 && : > /dev/nvidia0"


def _host_pid_of_python(unshare_pid: int, timeout: float = 10.0) -> int:
    """The training process's PID as the host (and NVML) sees it: unshare's descendant."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(unshare_pid).children(recursive=True):
                if "python" in p.name():
                    return p.pid
        time.sleep(0.05)
    raise AssertionError("the training process never started in its namespace")


def test_gpu_stalled_in_a_pid_namespace(sshfs_mount, fake_nvml: FakeNvml, tmp_path: Path) -> None:
    need_root()
    need_tool("sshfs")
    need_tool("unshare")
    logdir = str(sshfs_mount.path)
    script = tmp_path / "event_file_writer.py"
    script.write_text(CONTAINER_TRAINING)
    out = tmp_path / "samples.jsonl"
    fake_nvml.write([gpu(0, util=85)])
    inner = f"{SETUP} && exec {sys.executable} {script} {logdir} {out} '{json.dumps(OVERRIDES)}'"
    child = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", inner],
        env=fake_nvml.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        host_pid = _host_pid_of_python(child.pid)
        fake_nvml.write([gpu(0, util=85, procs={host_pid: 3 * GIB})])
        healthy = wait_for(
            out,
            lambda s: s["gpus"] and s["gpus"][0]["process_mem_bytes"] == 3 * GIB,
            timeout=30,
        )
        last = (read_samples(out) or [{}])[-1]
        assert healthy is not None, (
            f"no GPU memory attributed: {last.get('gpus')} {last.get('notes')}"
        )
        assert healthy["process"]["pid"] == 1  # its own PID namespace: NVML's PID is not here
        assert "open /dev/nvidia* files" in healthy["notes"]["gpu_processes"]
        assert "gpu-stalled" not in codes(healthy)

        sshfs_mount.pause()
        fake_nvml.write([gpu(0, util=0, procs={host_pid: 3 * GIB})])
        stalled = wait_for(out, lambda s: "gpu-stalled" in codes(s), timeout=40)
        assert stalled is not None, "gpu-stalled never fired inside the PID namespace"
    finally:
        sshfs_mount.resume()
        err = stop_group(child)
    assert "Traceback" not in err, err
    alert = next(w for w in stalled["warnings"] if w["code"] == "gpu-stalled")
    assert "training process (pid 1) holds 3 GiB" in alert["message"]
    assert f"{logdir} is on fuse.sshfs" in alert["message"]
