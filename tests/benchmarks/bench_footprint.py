"""Row footprint (issue 33): what leaving trainwatch on costs, in processes, PSS and CPU,
side by side with ``iostat -x 1``, glances and jupyter-resource-usage, in one run.

- a kernel no server started (VS Code, plain IPython): bare, then ``%load_ext`` and
  ``%trainwatch /tmp`` (the sampler in the kernel): processes and PSS over the bare kernel,
  CPU of its tree over the window with no browser attached;
- a Jupyter server: bare (the extension off) and with the extension, its sampler running
  (one attached notebook holds it): the server's own process and its helpers, kernels left
  out;
- 1, 4 and 16 notebooks on one server, each ``%trainwatch`` on a local directory of its own,
  kernels attached (the default) and, for comparison, ``attach_kernels`` off: every process
  of the server's tree, PSS and CPU less what as many bare kernels cost;
- the peers: ``iostat -x 1``, ``glances -q --export csv -t 1`` and a jupyter-resource-usage
  server polled on ``/api/metrics/v1`` at 1 s (the peers venv, README).

PSS is ``/proc/<pid>/smaps_rollup`` (shared pages split between their users); CPU is the
process tree's, from schedstat (common.TreeCpu), over ``peers_s`` seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .common import PEERS_VENV, Config, Row, Server, TreeCpu, env_with_repo, guarded, judged
from .common import jupyter_server as start_server

GROUP = "footprint"
HELPER = "trainwatch_lab.core.worker.main"
NOTEBOOKS = (1, 4, 16)


def pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree(pid: int) -> list[int]:
    import psutil

    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def cpu_pct(pid: int, seconds: float) -> float:
    """Percent of one core used by ``pid``'s tree over ``seconds``."""
    meter = TreeCpu(pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        meter.poll()
    return 100.0 * meter.poll() / seconds


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


# -- kernels ------------------------------------------------------------------------------
class Kernel:
    """A kernel driven over its connection file (started by a server, or by us)."""

    def __init__(self, connection_file: str, pid: int, manager: Any = None) -> None:
        from jupyter_client import BlockingKernelClient

        self.pid, self.manager = pid, manager
        self.client = BlockingKernelClient()
        self.client.load_connection_file(connection_file)
        # no heartbeat: on a loaded machine (16 kernels starting) a late beat reads as a
        # dead kernel; kernel_info answering is the test of life here
        self.client.start_channels(hb=False)
        self.client.wait_for_ready(120)

    def run(self, code: str) -> None:
        self.client.execute_interactive(code, timeout=120, output_hook=lambda m: None)

    def watch(self, path: str) -> None:
        self.run("%load_ext trainwatch_lab")
        self.run(f"%trainwatch {path}")

    def close(self) -> None:
        self.client.stop_channels()
        if self.manager is not None:
            self.manager.shutdown_kernel(now=True)


@contextlib.contextmanager
def own_kernel() -> Iterator[Kernel]:
    from jupyter_client.manager import KernelManager

    env = env_with_repo()
    env.pop("TRAINWATCH_HUB", None)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kernel = Kernel(km.connection_file, km.provisioner.process.pid, km)
    try:
        yield kernel
    finally:
        kernel.close()


def server_kernel(server: Server, runtime: Path) -> Kernel:
    import json
    import urllib.request

    req = urllib.request.Request(
        server.url + "api/kernels",
        data=json.dumps({"name": "python3"}).encode(),
        method="POST",
        headers={"Authorization": f"token {server.token}"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        kid = json.loads(resp.read())["id"]
    connection = runtime / f"kernel-{kid}.json"
    for _ in range(600):
        if connection.exists():
            break
        time.sleep(0.1)
    pid = next(p for p in tree(server.proc.pid)[1:] if str(connection) in cmdline(p))
    return Kernel(str(connection), pid)


@contextlib.contextmanager
def server(extension: bool, attach: bool = True) -> Iterator[tuple[Server, Path]]:
    runtime = Path(tempfile.mkdtemp(prefix="twbench-runtime-"))
    os.environ["JUPYTER_RUNTIME_DIR"] = str(runtime)
    args = ["--TrainWatch.record=False", "--TrainWatch.watch_processes=False"]
    if extension:
        args.append(f"--TrainWatch.attach_kernels={attach}")
    try:
        with start_server(extensions={"trainwatch_lab": extension}, extra_args=args) as srv:
            yield srv, runtime
    finally:
        os.environ.pop("JUPYTER_RUNTIME_DIR", None)
        shutil.rmtree(runtime, ignore_errors=True)


# -- measurements -------------------------------------------------------------------------
def measure_kernel(cfg: Config) -> list[Row]:
    with own_kernel() as bare:
        time.sleep(2)
        base_pss, base_procs = pss_bytes(bare.pid), len(tree(bare.pid))
        base_cpu = cpu_pct(bare.pid, cfg.peers_s)
        bare.watch("/tmp")
        time.sleep(3)
        pids = tree(bare.pid)
        extra_pss = sum(pss_bytes(p) for p in pids) - base_pss
        extra_procs = len(pids) - base_procs
        cpu = cpu_pct(bare.pid, cfg.peers_s)
    return [
        Row(
            GROUP,
            "kernel, sampler in the kernel: processes over a bare kernel",
            str(extra_procs),
            "<= 2",
            judged(extra_procs <= 2),
            "`%trainwatch /tmp`, no server",
        ),
        Row(
            GROUP,
            "kernel, sampler in the kernel: PSS over a bare kernel",
            mib(extra_pss),
            "<= 40 MiB",
            judged(extra_pss <= 40 * 2**20),
            f"bare kernel {mib(base_pss)}",
        ),
        Row(
            GROUP,
            "kernel, sampler in the kernel: CPU (no browser)",
            f"{cpu:.2f} % of a core",
            "",
            "",
            f"bare kernel {base_cpu:.2f} %",
        ),
    ]


def server_own(srv: Server) -> tuple[int, int]:
    """(PSS, processes) of the server's process and its helpers, kernels left out."""
    pids = [p for p in tree(srv.proc.pid) if "ipykernel" not in cmdline(p)]
    return sum(pss_bytes(p) for p in pids), len(pids)


def measure_server(cfg: Config) -> list[Row]:
    with server(extension=False) as (srv, _):
        time.sleep(3)
        bare_pss, bare_procs = server_own(srv)
        bare_cpu = cpu_pct(srv.proc.pid, cfg.peers_s)
    with server(extension=True) as (srv, runtime):
        kernel = server_kernel(srv, runtime)
        try:
            kernel.watch("/tmp")
            time.sleep(3)
            pss, procs = server_own(srv)
            meter = TreeCpu(srv.proc.pid, exclude=set(tree(kernel.pid)))
            time.sleep(cfg.peers_s)
            cpu = 100.0 * meter.poll() / cfg.peers_s
        finally:
            kernel.close()
    return [
        Row(
            GROUP,
            "server with the extension, sampler running: PSS over a bare server",
            mib(pss - bare_pss),
            "<= 40 MiB",
            judged(pss - bare_pss <= 40 * 2**20),
            f"bare server {mib(bare_pss)}, {bare_procs} process(es); with it {procs}",
        ),
        Row(
            GROUP,
            "server with the extension, sampler running: CPU",
            f"{cpu:.2f} % of a core",
            "",
            "",
            f"bare server {bare_cpu:.2f} %; one attached notebook holds the sampler",
        ),
    ]


def measure_notebooks(cfg: Config, attach: bool) -> list[Row]:
    rows: list[Row] = []
    mode = "attached" if attach else "each kernel its own sampler"
    with own_kernel() as bare:
        time.sleep(2)
        kernel_pss = pss_bytes(bare.pid)
        kernel_cpu = cpu_pct(bare.pid, min(cfg.peers_s, 20))
    for n in NOTEBOOKS:
        with server(extension=True, attach=attach) as (srv, runtime):
            bare_pss, _ = server_own(srv)
            kernels: list[Kernel] = []
            try:
                dirs = [tempfile.mkdtemp(prefix=f"twbench-nb{i}-") for i in range(n)]
                kernels.extend(server_kernel(srv, runtime) for _ in range(n))
                for kernel, d in zip(kernels, dirs, strict=True):
                    kernel.watch(d)
                time.sleep(5)
                pids = tree(srv.proc.pid)
                helpers = sum(HELPER in cmdline(p) for p in pids)
                watching_pss = sum(pss_bytes(p) for p in pids) - bare_pss - n * kernel_pss
                cpu = cpu_pct(srv.proc.pid, cfg.peers_s) - n * kernel_cpu
            finally:
                for kernel in kernels:
                    kernel.close()
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
        rows.append(
            Row(
                GROUP,
                f"{n} notebook(s) on one server, {mode}",
                f"{len(pids)} processes ({helpers} helpers), watching {mib(watching_pss)}, "
                f"{cpu:.2f} % of a core",
                "",
                "",
                "PSS and CPU of the server's tree less a bare server and n bare kernels",
            )
        )
    return rows


@contextlib.contextmanager
def started(args: list[str], **kw: Any) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(args, start_new_session=True, **kw)
    try:
        yield proc
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def measure_peers(cfg: Config) -> list[Row]:
    rows: list[Row] = []
    peers: list[tuple[str, list[str], dict[str, Any]]] = []
    if shutil.which("iostat"):
        peers.append(("`iostat -x 1`", ["iostat", "-x", "1"], {}))
    glances = PEERS_VENV / "bin" / "glances"
    tmp = Path(tempfile.mkdtemp(prefix="twbench-footprint-"))
    if glances.exists():
        csv = str(tmp / "glances.csv")
        peers.append(
            (
                "`glances -q --export csv -t 1`",
                [str(glances), "-q", "--export", "csv", "--export-csv-file", csv, "-t", "1"],
                {},
            )
        )
    for name, args, kw in peers:
        with started(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw) as p:
            time.sleep(3)
            pids = tree(p.pid)
            pss = sum(pss_bytes(q) for q in pids)
            cpu = cpu_pct(p.pid, cfg.peers_s)
        rows.append(
            Row(
                GROUP, f"peer {name}", f"{len(pids)} process(es), {mib(pss)}, {cpu:.2f} % of a core"
            )
        )
    python = PEERS_VENV / "bin" / "python"
    if python.exists():
        with start_server(str(python), extensions={"jupyter_resource_usage": True}) as srv:
            stop = threading.Event()

            def poll() -> None:
                while not stop.wait(1.0):
                    with contextlib.suppress(Exception):
                        srv.get_json("api/metrics/v1")

            thread = threading.Thread(target=poll, daemon=True)
            thread.start()
            time.sleep(3)
            pss, procs = sum(pss_bytes(q) for q in tree(srv.proc.pid)), len(tree(srv.proc.pid))
            cpu = cpu_pct(srv.proc.pid, cfg.peers_s)
            stop.set()
        rows.append(
            Row(
                GROUP,
                "peer jupyter-resource-usage server, polled at 1 s",
                f"{procs} process(es), {mib(pss)}, {cpu:.2f} % of a core",
                "",
                "",
                "the whole server (a bare one is in the server rows)",
            )
        )
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


def run(cfg: Config) -> list[Row]:
    if sys.platform != "linux":
        return [Row(GROUP, "footprint", "not available: Linux only", status="skip")]
    rows: list[Row] = []
    rows += guarded(GROUP, "kernel", lambda: measure_kernel(cfg))
    rows += guarded(GROUP, "server", lambda: measure_server(cfg))
    rows += guarded(GROUP, "notebooks attached", lambda: measure_notebooks(cfg, True))
    rows += guarded(GROUP, "notebooks alone", lambda: measure_notebooks(cfg, False))
    rows += guarded(GROUP, "peers", lambda: measure_peers(cfg))
    return rows
