"""Per-kernel data for the panel: each running kernel's pid, notebook, working directory,
process-tree I/O rates and GPU memory.

Runs on the sampler thread, never on the event loop. It only reads the kernel manager's
in-memory tables (plain attribute reads) and /proc; ``os.readlink`` of /proc/PID/cwd returns the
path text without touching the filesystem behind it, so a dead mount cannot block it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..core.model import Sample

log = logging.getLogger(__name__)

KernelDirs = Callable[[dict[str, str]], None]


def kernel_pid(kernel: Any) -> int | None:
    """The OS pid of a jupyter_client KernelManager's kernel, if it runs locally."""
    provisioner = getattr(kernel, "provisioner", None)
    for owner, attr in ((provisioner, "pid"), (getattr(provisioner, "process", None), "pid")):
        pid = getattr(owner, attr, None) if owner is not None else None
        if isinstance(pid, int) and pid > 0:
            return pid
    popen = getattr(kernel, "kernel", None)
    pid = getattr(popen, "pid", None)
    return pid if isinstance(pid, int) and pid > 0 else None


def kernel_pids(kernel_manager: Any) -> set[int]:
    """The pids of the running kernels (plain reads of the manager's tables): process
    discovery leaves their trees to this source."""
    pids: set[int] = set()
    if kernel_manager is None:
        return pids
    for kid in list(kernel_manager.list_kernel_ids()):
        try:
            pid = kernel_pid(kernel_manager.get_kernel(kid))
        except KeyError:  # shut down meanwhile
            continue
        if pid is not None:
            pids.add(pid)
    return pids


def notebook_paths(session_manager: Any) -> dict[str, str]:
    """Kernel id -> the notebook (or console) path its session serves, from the session
    manager's table: a kernel that ends is named by its notebook ("kernel python3 of
    train.ipynb"), not by an id nobody knows. The event loop only: the table is an SQLite
    connection that belongs to the loop's thread. Only a table in memory (Jupyter's
    default) is read: one in a file could sit on a share that hangs, and the loop must
    never wait on one; kernels then go unnamed."""
    if getattr(session_manager, "database_filepath", None) != ":memory:":
        return {}
    try:
        # a cursor of our own: the manager's shared one keeps its state between its steps
        rows = session_manager.connection.execute("SELECT kernel_id, path FROM session").fetchall()
    except Exception:  # another session manager, or a closed one: kernels go unnamed
        log.debug("trainwatch: the sessions' notebooks could not be read", exc_info=True)
        return {}
    return {str(kid): str(path) for kid, path in rows if kid and path}


def process_cwd(pid: int, proc: str = "/proc") -> str | None:
    try:
        return os.readlink(f"{proc}/{pid}/cwd")
    except OSError:
        return None


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (DataLoader workers hold GPU memory and do I/O too)."""
    try:
        import psutil

        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except Exception:
        return [pid]


class KernelsSource:
    """Fills ``sample.kernels``; reports kernel working directories through ``on_dirs``."""

    name = "kernels"

    def __init__(
        self,
        kernel_manager: Any,
        gpu_memory: Callable[[], dict[int, int]] | None = None,
        on_dirs: KernelDirs | None = None,
        notebooks: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.kernel_manager = kernel_manager
        self.gpu_memory = gpu_memory
        self.on_dirs = on_dirs
        self.notebooks = notebooks  # kernel id -> notebook path, kept by the event loop
        self._io: dict[str, tuple[int, Any]] = {}  # kernel id -> (pid, ProcessIOSource)

    def _kernels(self) -> dict[str, Any]:
        km = self.kernel_manager
        if km is None:
            return {}
        out = {}
        for kid in list(km.list_kernel_ids()):
            try:
                out[kid] = km.get_kernel(kid)
            except KeyError:  # shut down meanwhile
                continue
        return out

    def _io_of(self, kid: str, pid: int, t: float) -> dict[str, Any] | None:
        try:
            from ..core.processes.io import ProcessIOSource
        except ImportError:  # until the process source lands
            return None
        held = self._io.get(kid)
        if held is None or held[0] != pid:
            if held is not None:  # the kernel restarted: the old process's files go
                held[1].close()
            held = (pid, ProcessIOSource(pid=pid, children=True))
            self._io[kid] = held
        scratch = Sample(t=t)
        held[1].collect(scratch)
        return scratch.process.to_json() if scratch.process is not None else None

    def collect(self, sample: Sample) -> None:
        kernels = self._kernels()
        gpu_mem: dict[int, int] = {}
        if self.gpu_memory is not None:
            try:
                gpu_mem = self.gpu_memory() or {}
            except Exception:
                log.debug("GPU process memory unavailable", exc_info=True)
        dirs: dict[str, str] = {}
        notebooks = self.notebooks() if self.notebooks is not None else {}
        for kid, kernel in kernels.items():
            pid = kernel_pid(kernel)
            entry: dict[str, Any] = {
                "id": kid,
                "name": getattr(kernel, "kernel_name", None),
                "notebook": notebooks.get(kid),
                "execution_state": getattr(kernel, "execution_state", None),
                "pid": pid,
                "cwd": None,
                "io": None,
                "gpu_mem_bytes": None,
            }
            if pid is not None:
                entry["cwd"] = process_cwd(pid)
                if entry["cwd"]:
                    dirs[kid] = entry["cwd"]
                try:
                    entry["io"] = self._io_of(kid, pid, sample.t)
                except Exception as exc:  # the kernel may have died between two reads
                    entry["io"] = None
                    log.debug("kernel %s I/O: %s", kid, exc)
                if gpu_mem:
                    held = [gpu_mem[p] for p in process_tree(pid) if p in gpu_mem]
                    entry["gpu_mem_bytes"] = sum(held) if held else 0
            sample.kernels[kid] = entry
        for gone in set(self._io) - set(kernels):
            _, src = self._io.pop(gone)
            closer = getattr(src, "close", None)
            if callable(closer):
                closer()
        if self.on_dirs is not None:
            self.on_dirs(dirs)

    def close(self) -> None:
        for _, src in self._io.values():
            closer = getattr(src, "close", None)
            if callable(closer):
                closer()
        self._io.clear()
