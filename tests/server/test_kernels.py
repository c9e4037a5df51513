"""KernelsSource on a real process tree: pid, working directory, I/O, and GPU memory summed
over the kernel and its children (DataLoader workers hold GPU memory too)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

from trainwatch_lab.core.model import Sample
from trainwatch_lab.server.kernels import KernelsSource, kernel_pid

TREE = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


class KernelManager:
    """The two calls KernelsSource makes on jupyter_server's MappingKernelManager."""

    def __init__(self, kernels: dict) -> None:
        self.kernels = kernels

    def list_kernel_ids(self) -> list[str]:
        return list(self.kernels)

    def get_kernel(self, kid: str):
        return self.kernels[kid]


def test_a_kernel_tree_is_reported_with_its_gpu_memory(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", TREE], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        child = int(parent.stdout.readline())
        kernel = SimpleNamespace(
            provisioner=SimpleNamespace(pid=parent.pid),
            kernel_name="python3",
            execution_state="busy",
        )
        reports: list[dict[str, str]] = []
        # what NVML would report: the kernel, its worker, and somebody else's process
        nvml = {parent.pid: 100 << 20, child: 300 << 20, 1: 7 << 20}
        source = KernelsSource(KernelManager({"k1": kernel}), lambda: nvml, reports.append)
        for _ in range(2):  # the second tick has I/O rates
            sample = Sample(t=time.time())
            source.collect(sample)
            time.sleep(0.1)
        entry = sample.kernels["k1"]
        assert entry["pid"] == parent.pid and entry["execution_state"] == "busy"
        assert entry["cwd"] == str(tmp_path) and reports[-1] == {"k1": str(tmp_path)}
        assert entry["gpu_mem_bytes"] == 400 << 20
        assert entry["io"] is not None and entry["io"]["pids"] >= 2
        assert "k1" in sample.to_json()["kernels"]
    finally:
        parent.kill()
        parent.wait()
    # the kernel is gone: no entry, and its directory is no longer reported
    source.kernel_manager.kernels.clear()
    sample = Sample(t=time.time())
    source.collect(sample)
    assert sample.kernels == {} and reports[-1] == {}


def test_kernel_pid_falls_back_to_the_popen():
    assert kernel_pid(SimpleNamespace(provisioner=None, kernel=SimpleNamespace(pid=42))) == 42
    assert kernel_pid(SimpleNamespace(provisioner=SimpleNamespace(pid=None), kernel=None)) is None


def test_a_tick_that_ends_after_the_server_s_loop_closed_is_no_error() -> None:
    """The sampler thread hands the loop its notebook look-up each tick: a tick that ends
    while the server shuts down (its loop closed) must not fail the subscriber."""
    import asyncio

    from trainwatch_lab.server.config import ServerSettings
    from trainwatch_lab.server.hub import Hub

    hub = Hub(ServerSettings(watch_processes=False, probe=False, gpu=False, record=False))
    loop = asyncio.new_event_loop()
    loop.close()
    hub._loop = loop
    try:
        hub._on_sample(Sample(t=time.time()))  # raised RuntimeError('Event loop is closed')
        assert hub.latest is not None
    finally:
        hub.close_now()


def test_a_sessions_table_in_a_file_is_never_read_on_the_loop(tmp_path) -> None:
    """Jupyter keeps its sessions in memory by default; a table in a file (which could sit
    on a share that hangs) is not read: the kernels go unnamed, the loop never waits."""
    from trainwatch_lab.server.kernels import notebook_paths

    class FileSessions:
        database_filepath = str(tmp_path / "sessions.db")

        @property
        def connection(self):
            raise AssertionError("the sessions' file was opened on the loop")

    assert notebook_paths(FileSessions()) == {}
    assert notebook_paths(None) == {}
