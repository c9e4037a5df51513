"""The one Sampler of the server process, shared by every browser tab.

It starts on the first client (WebSocket or REST call) and stops ``stop_grace_s`` after the last
one left, so an idle JupyterLab costs nothing. Sampler start/stop/close can block (thread joins,
helper processes, NVML), so they run in a small executor, never on the event loop; samples are
serialised on the sampler thread and hopped to the loop with ``call_soon_threadsafe``.

Watched paths carry roles: ``root`` (the Jupyter root dir), ``kernel:<id>`` (a kernel's working
directory), ``process:<pid>`` (a directory of a training process found on the machine:
core.training_source) and ``user`` (added in the panel). A path is watched while it has a role;
a path the user removed is not re-added automatically until they add it again, and a process
the user hid is neither listed nor watched until they show it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from ..core.history import History, capacity_for
from ..core.model import Sample, json_safe
from ..core.paths import normalise
from ..core.sampler import Sampler
from ..core.training import process_identity
from ..core.training_source import TrainingSource
from ..monitor import make_sampler
from .config import TrainWatch
from .kernels import KernelsSource, kernel_pids

log = logging.getLogger(__name__)

SERVER_SELF_SOURCES = frozenset({"process", "main_thread"})

Listener = Callable[[Sample, str], None]  # called on the sampler thread with (sample, json text)


path_key = normalise  # the agreed key (handlers import it under this name)


def dumps(obj: Any) -> str:
    """Strict JSON (browsers reject NaN/Infinity): non-finite numbers become null."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(json_safe(obj), allow_nan=False, separators=(",", ":"))


def build_sampler(
    paths: list[str], interval: float, probe: bool, gpu: bool, defaults: Defaults
) -> Sampler:
    """The same Sampler every surface uses; the GPU source attributes memory to this server's
    process tree, which holds the kernels it started."""
    return make_sampler(paths, interval=interval, probe=probe, gpu=gpu, defaults=defaults)


class Hub:
    def __init__(
        self,
        config: TrainWatch,
        root_dir: str | None = None,
        kernel_manager: Any = None,
        sampler_factory: Callable[..., Sampler] = build_sampler,
    ) -> None:
        self.config = config
        self.defaults = replace(DEFAULTS, interval_s=config.interval, history_s=config.history_s)
        self.kernel_manager = kernel_manager
        self.sampler_factory = sampler_factory
        self.history = History(capacity=capacity_for(config.history_s, config.interval))
        self.sampler: Sampler | None = None
        self.clients = 0
        self.starts = 0  # how many times a sampler was started (tests, diagnostics)
        self._roles: dict[str, set[str]] = {}
        self._dismissed: set[str] = set()
        self._hidden: set[tuple[int, int]] = set()  # (pid, start ticks) hidden in the panel
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="trainwatch-io")
        self._state_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_handle: asyncio.TimerHandle | None = None
        self._run = 0  # sampler generation; a snapshot waits for a sample of the current one
        self._fresh_run = -1
        self._waiters: list[asyncio.Future[None]] = []
        if config.watch_root_dir and root_dir:
            self._roles.setdefault(path_key(root_dir), set()).add("root")
        for p in config.paths:
            self._roles.setdefault(path_key(p), set()).add("user")

    # -- threads ---------------------------------------------------------------------
    async def in_executor(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None):
        """Run a call that may block (filesystem, thread join) off the event loop."""
        fut = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        return await (asyncio.wait_for(fut, timeout) if timeout else fut)

    async def in_thread(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """Run a call that touches a filesystem on its own daemon thread, with a timeout.

        Not the pool: a call stuck on a dead mount would hold a pool worker for good and
        could starve the sampler's start/stop.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if fut.done():
                return
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        def hand_back(ok: bool, value: Any) -> None:
            # the server may have shut its loop down while the call was stuck on a mount:
            # nobody awaits the answer any more, and the thread must end quietly
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, ok, value)

        def work() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting coroutine
                hand_back(False, exc)
            else:
                hand_back(True, result)

        threading.Thread(target=work, name="trainwatch-fs", daemon=True).start()
        return await asyncio.wait_for(fut, timeout)

    # -- lifecycle -------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.sampler is not None and self.sampler.running

    def _lock_for_loop(self) -> asyncio.Lock:
        if self._state_lock is None:
            self._state_lock = asyncio.Lock()
            self._loop = asyncio.get_running_loop()
        return self._state_lock

    def _create_and_start(self) -> Sampler:
        sampler = self.sampler_factory(
            self.watched(),
            interval=self.config.interval,
            probe=self.config.probe,
            gpu=self.config.gpu,
            defaults=self.defaults,
        )
        sampler.history = self.history  # history survives restarts of the sampler
        # "process" and "main_thread" would describe the Jupyter server itself, which trains
        # nothing: per-kernel I/O comes from the kernels source instead
        sampler.sources = [s for s in sampler.sources if s.name not in SERVER_SELF_SOURCES]
        gpus = sampler.find_source("gpus")
        gpu_memory = getattr(gpus, "process_memory", None)
        if self.kernel_manager is not None:
            sampler.sources.append(
                KernelsSource(
                    self.kernel_manager,
                    gpu_memory=gpu_memory if callable(gpu_memory) else None,
                    on_dirs=self._kernel_dirs if self.config.watch_kernel_dirs else None,
                )
            )
        if self.config.watch_processes:
            sampler.sources.append(
                TrainingSource(
                    on_paths=self._process_dirs,
                    gpu_memory=gpu_memory if callable(gpu_memory) else None,
                    # kernels are this server's own: the kernels source reports them
                    skip_trees=lambda: kernel_pids(self.kernel_manager),
                    hidden=self.hidden_processes,
                    max_processes=self.config.max_processes,
                    max_paths=self.config.max_process_paths,
                )
            )
        sampler.subscribe(self._on_sample)
        return sampler.start()

    async def ensure_running(self) -> Sampler:
        async with self._lock_for_loop():
            self._cancel_stop()
            if self.sampler is None:
                self._run += 1
                self.sampler = await self.in_executor(self._create_and_start)
                self.starts += 1
                log.info("trainwatch sampler started (interval %.3g s)", self.config.interval)
            sampler = self.sampler
        if self.clients == 0:  # REST-only use: stop again once nobody asks
            self._schedule_stop()
        return sampler

    async def acquire(self) -> None:
        """A streaming client arrived."""
        self.clients += 1
        await self.ensure_running()

    def release(self) -> None:
        """A streaming client left; stop after the grace period if it was the last."""
        self.clients = max(0, self.clients - 1)
        if self.clients == 0:
            self._schedule_stop()

    def _cancel_stop(self) -> None:
        if self._stop_handle is not None:
            self._stop_handle.cancel()
            self._stop_handle = None

    def _schedule_stop(self) -> None:
        self._cancel_stop()
        loop = self._loop or asyncio.get_event_loop()
        self._stop_handle = loop.call_later(
            self.config.stop_grace_s, lambda: asyncio.ensure_future(self.stop_if_idle())
        )

    async def stop_if_idle(self) -> None:
        async with self._lock_for_loop():
            self._stop_handle = None
            if self.clients > 0 or self.sampler is None:
                return
            sampler, self.sampler = self.sampler, None
        await self.in_executor(sampler.close)
        log.info("trainwatch sampler stopped (no client left)")

    async def shutdown(self) -> None:
        self._cancel_stop()
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            await self.in_executor(sampler.close)
        self._executor.shutdown(wait=False)

    def close_now(self) -> None:
        """Synchronous shutdown for interpreter exit (no event loop any more)."""
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.close()
        self._executor.shutdown(wait=False)

    # -- samples ---------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _on_sample(self, sample: Sample) -> None:  # sampler thread
        run = self._run
        with self._lock:
            listeners = list(self._listeners)
        text = dumps(sample.to_json()) if listeners else ""
        for listener in listeners:
            try:
                listener(sample, text)
            except Exception:
                log.exception("trainwatch listener failed")
        if self._fresh_run != run:
            self._fresh_run = run
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def fresh_sample(self) -> Sample | None:
        """The latest sample of the running sampler (waits for its first one)."""
        await self.ensure_running()
        if self._fresh_run != self._run:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, self.config.snapshot_wait_s)
            except asyncio.TimeoutError:
                return None
        return self.history.latest

    # -- watched paths ---------------------------------------------------------------
    def watched(self) -> list[str]:
        with self._lock:
            return sorted(self._roles)

    def roles(self) -> dict[str, list[str]]:
        with self._lock:
            return {p: sorted(r) for p, r in sorted(self._roles.items())}

    def _paths_source(self) -> Any:
        sampler = self.sampler
        return sampler.find_source("paths") if sampler is not None else None

    def _set_role(self, key: str, role: str, on: bool) -> None:
        """Add/remove one role; tell the running paths source when a path appears/vanishes."""
        with self._lock:
            roles = self._roles.get(key)
            before = bool(roles)
            if on:
                self._roles.setdefault(key, set()).add(role)
            elif roles is not None:
                roles.discard(role)
                if not roles:
                    del self._roles[key]
            after = bool(self._roles.get(key))
        source = self._paths_source()
        if source is None or before == after:
            return
        if after:
            source.add(key)
        else:
            source.remove(key)

    def add_user_path(self, path: str) -> str:
        key = path_key(path)
        with self._lock:
            self._dismissed.discard(key)
        self._set_role(key, "user", True)
        return key

    def remove_path(self, path: str) -> bool:
        """Stop watching ``path`` whatever put it there; auto-roles will not bring it back."""
        key = path_key(path)
        with self._lock:
            roles = set(self._roles.get(key, ()))
            if not roles:
                return False
            self._dismissed.add(key)
        for role in roles:
            self._set_role(key, role, False)
        return True

    def _kernel_dirs(self, dirs: dict[str, str]) -> None:  # sampler thread
        with self._lock:
            current = {
                (p, r) for p, rs in self._roles.items() for r in rs if r.startswith("kernel:")
            }
            wanted = {
                (path_key(d), f"kernel:{kid}")
                for kid, d in dirs.items()
                if path_key(d) not in self._dismissed
            }
        for key, role in current - wanted:
            self._set_role(key, role, False)
        for key, role in wanted - current:
            self._set_role(key, role, True)

    def _process_dirs(self, dirs: dict[str, set[int]]) -> None:  # sampler thread
        """Directories of training processes: one ``process:<pid>`` role per process."""
        with self._lock:
            current = {
                (p, r) for p, rs in self._roles.items() for r in rs if r.startswith("process:")
            }
            wanted = {
                (path_key(d), f"process:{pid}")
                for d, pids in dirs.items()
                for pid in pids
                if path_key(d) not in self._dismissed
            }
        for key, role in current - wanted:
            self._set_role(key, role, False)
        for key, role in wanted - current:
            self._set_role(key, role, True)

    # -- training processes ----------------------------------------------------------
    def hidden_processes(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self._hidden)

    def hide_process(self, pid: int) -> bool:
        """Hide a listed training process: its row and its directories go (procfs reads
        only: safe on the event loop). False when no such process is listed."""
        latest = self.history.latest
        listed = latest is not None and any(p.pid == pid for p in latest.processes)
        identity = process_identity(pid)
        if not listed or identity is None:
            return False
        with self._lock:
            self._hidden.add(identity)
        return True

    def show_process(self, pid: int) -> bool:
        """List a hidden process again; False when it was not hidden."""
        with self._lock:
            gone = {k for k in self._hidden if k[0] == pid}
            self._hidden -= gone
        return bool(gone)
