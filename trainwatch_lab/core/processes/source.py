"""The sampler source for training processes found on this machine (core.processes.discovery).

Why its own thread: a pass over /proc costs milliseconds with hundreds of processes, too much
for every tick and never acceptable on an event loop or a kernel's main thread. The thread
runs a pass every ``every_s`` seconds, or less often when a pass costs more than ``cpu_share``
of one core (its own CPU clock is the measure); each tick then reads the latest pass and adds
what changes every second: I/O rates, GPU memory, where the main thread waits.

A process stays listed until it ends (a checkpoint written every ten minutes must not make
its row flicker); its directories and working directory are handed to ``on_paths`` with the
pids they came from, and leave again with it, unless watched otherwise.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from ..defaults import DEFAULTS
from ..model import GpuState, Sample, TrainingProcess
from .discovery import REASONS, Found, Scanner, ScanResult, in_trees, label, process_identity
from .threadwait import task_wait
from .writes import WriteWatch

SCAN_EVERY_S = DEFAULTS.training_scan_every_s
CPU_SHARE = DEFAULTS.training_cpu_share
MAX_PROCESSES = DEFAULTS.max_training_processes
MAX_PATHS = DEFAULTS.max_training_paths

Identity = tuple[int, int]  # (pid, start ticks)
OnPaths = Callable[[dict[str, set[int]]], None]  # watched dir -> the pids it came from


class PathsLike(Protocol):
    def add(self, path: str, owner: int | None = None) -> str: ...

    def remove(self, path: str) -> None: ...


class FollowPaths:
    """``on_paths`` for a plain Sampler (CLI): adds the directories discovery wants to the
    paths source, removes those it added once no longer wanted, never one watched before."""

    def __init__(self, source: PathsLike, fixed: Iterable[str]) -> None:
        self.source = source
        self.fixed = {os.path.abspath(os.path.expanduser(p)) for p in fixed}
        self.added: set[str] = set()

    def __call__(self, wanted: dict[str, set[int]]) -> None:
        keys = set(wanted) - self.fixed
        for gone in sorted(self.added - keys):
            self.source.remove(gone)
        for new in sorted(keys - self.added):
            self.source.add(new, owner=min(wanted[new]))
        self.added = keys


def _weight(found: Found) -> tuple[int, int]:
    """GPU holders first, then event files, then checkpoints; older processes first."""
    return (min(REASONS.index(r) for r in found.reasons), found.start)


def gpu_indices(found: Found, gpus: list[GpuState], held: bool) -> list[int] | None:
    """CUDA indices of the GPUs a process has open. ``/dev/nvidiaN``'s N is the device's minor
    number, NVML's index on the usual machines (both follow PCI order). A process NVML says
    holds memory (``held``) with no device file visible here (NVML's pids are the host's, a
    container) is on the only GPU when there is one, else unknown (None)."""
    if found.gpu_minors:
        return sorted(g.index for g in gpus if g.nvml_index in found.gpu_minors)
    if held and len(gpus) == 1:
        return [gpus[0].index]
    return None if held else []


class TrainingSource:
    """Fills ``sample.processes`` and labels the paths discovery added (after the paths and
    GPU sources). ``gpu_memory``: pid -> bytes from NVML (GpuSource.process_memory);
    ``skip_trees``: pids whose trees are not listed (the server's kernels); ``hidden``: the
    identities the user hid in the panel."""

    name = "training"

    def __init__(
        self,
        on_paths: OnPaths | None = None,
        gpu_memory: Callable[[], dict[int, int]] | None = None,
        skip_trees: Callable[[], Collection[int]] | None = None,
        hidden: Callable[[], Collection[Identity]] | None = None,
        *,
        every_s: float = SCAN_EVERY_S,
        cpu_share: float = CPU_SHARE,
        max_processes: int = MAX_PROCESSES,
        max_paths: int = MAX_PATHS,
        all_users: bool | None = None,
        writes: WriteWatch | None = None,
    ) -> None:
        self.on_paths = on_paths
        self.gpu_memory = gpu_memory
        self.skip_trees = skip_trees
        self.hidden = hidden
        self.every_s = every_s
        self.cpu_share = cpu_share
        self.max_processes = max_processes
        self.max_paths = max_paths
        self.all_users = all_users
        self.passes = 0  # passes run, and their CPU in all (the benchmark reads these)
        self.cpu_s = 0.0
        self.last: ScanResult | None = None
        self._known: dict[Identity, Found] = {}
        self._scanner = Scanner()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._io: dict[Identity, Any] = {}  # ProcessIOSource per listed process
        self._wanted: dict[str, set[int]] | None = None
        # who writes under the watched paths (the user's and the training directories; not
        # the working directories it added, a home directory where anything writes)
        self.writes = writes if writes is not None else WriteWatch()
        self._roots: dict[str, tuple[str | None, str]] = {}
        self._cwds: set[str] = set()

    # -- the discovery thread ----------------------------------------------------------
    def _ask(self, fn: Callable[[], Any] | None, default: Any) -> Any:
        if fn is None:
            return default
        try:
            return fn()
        except Exception:  # a callback must never end the thread
            return default

    def run_pass(self) -> ScanResult:
        """One pass, merged into what is known: new processes join, ended ones leave."""
        skip = set(self._ask(self.skip_trees, ()))
        c0 = time.thread_time()
        try:
            self.writes.cover(self._roots)
            writers = self.writes.take()
        except Exception:  # never the end of the discovery
            writers = {}
        spent = time.thread_time() - c0  # ~9 us a file closed on a marked mount: in budget
        result = self._scanner.scan(
            holders=self._ask(self.gpu_memory, {}),
            skip_trees=skip,
            all_users=self.all_users,
            writers=writers,
        )
        result.cpu_s += spent
        proc = self._scanner.proc
        with self._lock:
            known = {
                k: f
                for k, f in self._known.items()
                if process_identity(k[0]) == k and not (skip and in_trees(k[0], skip, proc))
            }
            for found in result.found.values():
                if found.key in known:
                    known[found.key].merge(found)
                else:
                    known[found.key] = found
            self._known = known
            self.last = result
            self.passes += 1
            self.cpu_s += result.cpu_s
        return result

    def _run(self) -> None:
        while not self._closed:
            try:
                spent = self.run_pass().cpu_s
            except Exception:  # /proc unreadable: try again later
                spent = 0.0
            self._wake.wait(max(self.every_s, spent / self.cpu_share))

    def _ensure_thread(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(
                target=self._run, name="trainwatch-discover", daemon=True
            )
            self._thread.start()

    # -- the tick ----------------------------------------------------------------------
    def _listed(self) -> list[Found]:
        hidden = set(self._ask(self.hidden, ()))
        with self._lock:
            items = [f for k, f in self._known.items() if k not in hidden]
        return sorted(items, key=_weight)[: self.max_processes]

    def _io_of(self, found: Found, sample: Sample) -> Any:
        from .io import ProcessIOSource

        source = self._io.get(found.key)
        if source is None:
            source = self._io[found.key] = ProcessIOSource(pid=found.pid, children=True)
        scratch = Sample(t=sample.t)
        with contextlib.suppress(Exception):
            source.collect(scratch)
        return scratch.process

    def _row(self, found: Found, sample: Sample, memory: dict[int, int]) -> TrainingProcess:
        held = sum(memory.get(p, 0) for p in found.members)
        reasons = [r for r in REASONS if r in found.reasons]
        return TrainingProcess(
            pid=found.pid,
            command=found.command,
            cwd=found.cwd,
            reasons=reasons,
            gpus=gpu_indices(found, sample.gpus, held > 0),
            gpu_mem_bytes=held if memory or sample.gpus else None,
            io=self._io_of(found, sample),
            main_thread=task_wait(found.pid),
        )

    def _paths_of(self, rows: list[tuple[Found, TrainingProcess]]) -> dict[str, set[int]]:
        """The directories to watch, at most ``max_paths``: event dirs, checkpoint dirs, then
        working directories; each row gets its labels."""
        wanted: dict[str, set[int]] = {}
        tiers = [
            [(f, r, d, "event file") for f, r in rows for d in f.event_dirs],
            [(f, r, d, "checkpoint") for f, r in rows for d in f.checkpoint_dirs],
            [(f, r, d, "writes here") for f, r in rows for d in f.written_dirs],
            [(f, r, f.cwd, "working directory") for f, r in rows if f.cwd],
        ]
        for found, row, directory, what in (item for tier in tiers for item in tier):
            if directory not in wanted and len(wanted) >= self.max_paths:
                continue
            wanted.setdefault(directory, set()).add(found.pid)
            row.paths.setdefault(directory, []).append(label(found.pid, row.command, what))
        return wanted

    def collect(self, sample: Sample) -> None:
        self._ensure_thread()
        memory = self._ask(self.gpu_memory, {}) or {}
        rows: list[tuple[Found, TrainingProcess]] = []
        for found in self._listed():
            row = self._row(found, sample, memory)
            if row.main_thread is not None:  # None: it ended since the last pass
                rows.append((found, row))
        wanted = self._paths_of(rows)
        self._cwds = {
            d for _, r in rows for d, ls in r.paths.items() if all("working dir" in x for x in ls)
        }
        self._roots = {
            p: (s.mountpoint if s.responsive else None, s.kind)
            for p, s in sample.paths.items()
            if p not in self._cwds
        }
        for _, row in rows:
            for directory, labels in row.paths.items():
                state = sample.paths.get(directory)
                if state is not None:
                    state.labels = list(labels)
        sample.processes = [row for _, row in rows]
        for key in set(self._io) - {f.key for f, _ in rows}:
            self._io.pop(key).close()
        if wanted != self._wanted and self.on_paths is not None:
            self._wanted = wanted
            self.on_paths({d: set(p) for d, p in wanted.items()})

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)
        for source in self._io.values():
            source.close()
        self._io.clear()
        self.writes.close()
