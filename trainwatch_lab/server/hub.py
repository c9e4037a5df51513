"""The one Sampler of the server process, shared by every browser tab and every scrape.

It starts on the first client (WebSocket, REST call or Prometheus scrape) and stops once
nobody holds its lease (server.lease: a connected client, the grace period after a REST
call or the last client, the next scrape due), so an idle JupyterLab costs nothing. What is
watched and why lives apart (server.watched) and survives restarts, as does the history.
Sampler start/stop/close can block (thread joins, helper processes, NVML), so they run in a
small executor, never on the event loop; samples are serialised on the sampler thread and
hopped to the loop with ``call_soon_threadsafe``.

Surfaces read ``latest``: the sample the hub's subscriber received, with its warnings and
headline. ``history.latest`` may be a tick whose warnings are still being evaluated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..advice.text import space_text
from ..core.defaults import DEFAULTS
from ..core.history import History, capacity_for
from ..core.model import Sample, dumps
from ..core.processes.discovery import process_identity
from ..core.sampler import Sampler, Source
from ..core.storage.diskstats import DiskCounters
from ..fix.mirror.files import MirrorFiles
from ..monitor import Discovery, GpuMemory, make_sampler
from ..prometheus.metrics import disk_counters
from .config import ServerSettings
from .kernels import KernelsSource, kernel_pids, notebook_paths
from .lease import Lease
from .recording.recorder import recording_for
from .watched import WatchedPaths, path_key

SETTINGS_KEY = "trainwatch_hub"  # where the extension keeps the Hub in the tornado settings
# the mirrors' status files are listed on a thread of their own: a tick waits this long at most
MIRRORS_WAIT_S = 0.25

log = logging.getLogger(__name__)

Listener = Callable[[Sample, str], None]  # called on the sampler thread with (sample, json text)

__all__ = ["Hub", "dumps", "path_key"]


class Hub:
    def __init__(
        self,
        config: ServerSettings,
        root_dir: str | None = None,
        kernel_manager: Any = None,
        sampler_factory: Callable[..., Sampler] = make_sampler,
        session_manager: Any = None,
    ) -> None:
        self.config = config
        # when this server's hub began: the panel's "since the last server restart"
        self.started_at = time.time()
        self.defaults = replace(DEFAULTS, interval_s=config.interval, history_s=config.history_s)
        self.kernel_manager = kernel_manager
        self.session_manager = session_manager
        # kernel id -> the notebook its session serves: read on the loop (the sessions'
        # table is the loop's), replaced whole, read by the sampler thread's kernels source
        self.notebooks: dict[str, str] = {}
        self.sampler_factory = sampler_factory
        self.history = History(capacity=capacity_for(config.history_s, config.interval))
        self.sampler: Sampler | None = None
        # the paths source of the sampler being started or running: told of every change of
        # the watched paths from the moment it exists, before ``sampler`` is set on the loop
        self._paths_source: Any = None
        self.latest: Sample | None = None  # the last sample handed to subscribers
        self.lease = Lease(config.stop_grace_s, config.scrape_lease_s)
        initial = [(p, "user") for p in config.paths]
        if config.watch_root_dir and root_dir:
            initial.insert(0, (root_dir, "root"))
        self.paths = WatchedPaths(initial)
        self.paths.on_change = self._path_changed
        self.starts = 0  # how many times a sampler was started (tests, diagnostics)
        self._hidden: set[tuple[int, int]] = set()  # (pid, start ticks) hidden in the panel
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="trainwatch-io")
        self._state_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_handle: asyncio.TimerHandle | None = None
        self._idle_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self._run = 0  # sampler generation; a snapshot waits for a sample of the current one
        self._fresh_run = -1
        self._waiters: list[asyncio.Future[None]] = []
        self.notifier = config.notifier()
        self.recording = recording_for(self)  # the history on disk (issue 27), None when off
        # the log mirrors of this machine (issue 13), read from their status files on their
        # own threads: local disk only, never the share
        self.mirror_files = MirrorFiles()
        self.mirrors: list[dict[str, Any]] = []
        self.attach: Any = None  # server.attach.AttachServer: the kernels' way in (issue 33)

    @property
    def clients(self) -> int:
        """Streaming clients connected now."""
        return self.lease.clients

    @property
    def looking(self) -> bool:
        """A panel streams samples now (the notifier and the recording hold the lease too)."""
        return bool(self._listeners)

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

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop, once the hub ran on it."""
        return self._loop

    def _lock_for_loop(self) -> asyncio.Lock:
        if self._state_lock is None:
            self._state_lock = asyncio.Lock()
            self._loop = asyncio.get_running_loop()
        return self._state_lock

    def _kernels(self, gpu_memory: GpuMemory | None) -> list[Source]:
        """Per-kernel I/O and GPU memory (and their working directories, when watched)."""
        if self.kernel_manager is None:
            return []
        on_dirs = self._kernel_dirs if self.config.watch_kernel_dirs else None
        return [
            KernelsSource(
                self.kernel_manager,
                gpu_memory=gpu_memory,
                on_dirs=on_dirs,
                notebooks=lambda: self.notebooks,
            )
        ]

    def _read_notebooks(self) -> None:  # event loop
        self.notebooks = notebook_paths(self.session_manager)

    def _create_and_start(self) -> Sampler:
        config = self.config
        discovery = Discovery(
            on_paths=self._process_dirs,
            # kernels are this server's own: the kernels source reports them
            skip_trees=lambda: kernel_pids(self.kernel_manager),
            hidden=self.hidden_processes,
            max_processes=config.max_processes,
            max_paths=config.max_process_paths,
        )
        sampler = self.sampler_factory(
            # paths found on the machine follow through _tell, told they were not asked for
            [p for p in self.watched() if self.paths.requested(p)],
            # the Jupyter server trains nothing: per-kernel I/O comes from the kernels source
            process=False,
            interval=config.interval,
            probe=config.probe,
            gpu=config.gpu if config.gpu_selection is None else config.gpu_selection,
            defaults=self.defaults,
            history=self.history,  # the charts survive restarts of the sampler
            processes=discovery if config.watch_processes else False,
            more_sources=self._kernels,
            # the fill of a path judged from the recorded past too, as the kernels judge it
            past_store=self.recording.recorder.path if self.recording is not None else None,
        )
        paths_source = self._paths_source = sampler.find_source("paths")
        if paths_source is not None:
            paths_source.probe_others = config.probe_other_users
        watched = self.watched()  # (read again: a change since the line above was told to
        for key in watched:  # the last source) whose quota: the paths came without owners
            self._tell(paths_source, key, True)
        for key in set(paths_source.paths if paths_source else ()) - set(watched):
            self._tell(paths_source, key, False)
        if self.recording is not None:  # first: a paused recording's note reaches the panel
            sampler.subscribe(self.recording)
        sampler.subscribe(self._on_sample)
        if self.notifier is not None:  # word when nobody looks (issue 17)
            sampler.subscribe(self.notifier)
        return sampler.start()

    async def ensure_running(self) -> Sampler:
        """Start the sampler if needed; the caller holds the lease for the grace period
        (a REST call), and longer if it holds it otherwise (a client, a scrape)."""
        self.lease.hold(self.config.stop_grace_s)
        async with self._lock_for_loop():
            self._cancel_stop()
            if self.sampler is None:
                self._run += 1
                self._read_notebooks()  # the first tick names the kernels running now
                sampler = await self.in_executor(self._create_and_start)
                if self._closed:  # shut down while it started: it must not run on alone
                    threading.Thread(target=sampler.close, daemon=True).start()
                    raise RuntimeError("trainwatch: the server's monitor is shutting down")
                self.sampler = sampler
                self.starts += 1
                log.info("trainwatch sampler started (interval %.3g s)", self.config.interval)
            sampler = self.sampler
        self._schedule_stop()
        return sampler

    async def acquire(self) -> None:
        """A streaming client arrived."""
        self.lease.acquire()
        await self.ensure_running()

    def release(self) -> None:
        """A streaming client left; stop after the grace period if it was the last."""
        self.lease.release()
        self._schedule_stop()

    def _cancel_stop(self) -> None:
        if self._stop_handle is not None:
            self._stop_handle.cancel()
            self._stop_handle = None

    def _schedule_stop(self) -> None:
        """Look again when the lease runs out (never while a client holds it)."""
        self._cancel_stop()
        left = self.lease.remaining()
        if left is None:
            return
        loop = self._loop or asyncio.get_event_loop()
        self._stop_handle = loop.call_later(
            left + 0.01, lambda: asyncio.ensure_future(self.stop_if_idle())
        )

    async def stop_if_idle(self) -> None:
        async with self._lock_for_loop():
            self._stop_handle = None
            if self.sampler is None:
                return
            if self.lease.held:  # held again meanwhile (a scrape, a REST call)
                self._schedule_stop()
                return
            sampler, self.sampler = self.sampler, None
        await self.in_executor(sampler.close)
        log.info("trainwatch sampler stopped (nobody asked for samples)")

    # -- the recording's hold (server.recording.recorder: idle servers cost nothing) ------------
    async def recording_wake(self, why: str | None = None) -> None:
        """The recording takes the lease (the server's start: ``why`` None; something
        worth recording found: ``why`` says what)."""
        recording = self.recording
        if recording is None or self._closed:
            return
        if recording.holding:
            recording.took(True, why)
            return
        recording.took(True, why)
        await self.acquire()

    async def recording_idle(self) -> None:
        """Nothing worth recording for long: let go of the lease (the sampler stops once
        nobody else holds it) and look for training every ``record_idle_check_s``."""
        recording = self.recording
        if recording is None or self._closed or not recording.holding:
            if recording is not None:
                recording.took(recording.holding, None)
            return
        recording.took(False, "idle")
        self.release()
        self._schedule_idle_check()

    def _schedule_idle_check(self) -> None:
        if self._closed or self.recording is None:
            return
        loop = self._loop or asyncio.get_event_loop()
        self._idle_handle = loop.call_later(
            self.config.record_idle_check_s, lambda: asyncio.ensure_future(self._idle_check())
        )

    async def _idle_check(self) -> None:
        """The cheap look of an idle recording: a busy kernel or an added path (tables in
        memory, here), else one procfs pass for a training process (a worker thread).
        While a panel keeps the sampler running its samples decide instead."""
        self._idle_handle = None
        recording = self.recording
        if recording is None or self._closed or recording.holding:
            return
        recording.checks += 1
        why = None
        if not self.running:
            why = (
                recording.busy_kernel()
                or recording.kernel_change()
                or ("a path was added" if recording.user_paths() else None)
            )
            if why is None:
                try:
                    why = await self.in_executor(recording.training_process)
                except Exception:  # a look that failed looks again next time
                    log.debug("trainwatch: the idle look for training failed", exc_info=True)
        if why is not None:
            await self.recording_wake(why)
        else:
            self._schedule_idle_check()

    def _close_attach(self) -> None:
        attach, self.attach = self.attach, None
        if attach is not None:
            attach.close()

    async def shutdown(self) -> None:
        self._closed = True
        self._close_attach()
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        self._cancel_stop()
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            await self.in_executor(sampler.close)
        if self.notifier is not None:
            self.notifier.close(timeout=0)
        if self.recording is not None:
            await self.in_executor(self.recording.close)
        self.mirror_files.close()
        self._executor.shutdown(wait=False)

    def close_now(self) -> None:
        """Synchronous shutdown for interpreter exit (no event loop any more)."""
        self._closed = True
        with contextlib.suppress(Exception):  # (the loop that held its socket may be gone)
            self._close_attach()
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.close()
        if self.notifier is not None:
            self.notifier.close(timeout=0)
        if self.recording is not None:
            self.recording.close()
        self.mirror_files.close()
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

    def sample_json(self, sample: Sample) -> dict[str, Any]:
        """What the panel gets for a sample: the sample, the machine's log mirrors, the
        paths watched now with why (``{path: roles}``): the panel lists those, every tick,
        and says its scope with them ("this machine: 3 paths"), and each path's free space
        in the words the dashboard and `watch` use (``{path: text}``): one figure, one
        rounding, in every view."""
        return {
            **sample.to_json(),
            "mirrors": self.mirrors,
            "watched": self.roles(),
            "space": {path: space_text(p) for path, p in sample.paths.items()},
        }

    def _look_at_mirrors(self) -> None:  # sampler thread
        try:
            self.mirrors = [m.to_json() for m in self.mirror_files.look(wait=MIRRORS_WAIT_S)]
        except Exception:  # a convenience: never a reason to lose a sample
            log.debug("trainwatch: reading the mirrors' status files failed", exc_info=True)

    def _on_sample(self, sample: Sample) -> None:  # sampler thread
        run = self._run
        self._look_at_mirrors()
        # a tick that began before a path was removed recorded it once more: dropped again
        for gone in set(sample.paths).difference(self.watched()):
            self.history.forget(gone)
        self.latest = sample  # finished: warnings and headline evaluated
        with self._lock:
            listeners = list(self._listeners)
        text = dumps(self.sample_json(sample)) if listeners else ""
        for listener in listeners:
            try:
                listener(sample, text)
            except Exception:
                log.exception("trainwatch listener failed")
        self._on_loop(self._read_notebooks)  # the next tick names the kernels started since
        if self._fresh_run != run:
            self._fresh_run = run
            self._on_loop(self._wake_waiters)

    def _on_loop(self, callback: Callable[[], None]) -> None:  # sampler thread
        """``callback`` on the server's loop; nothing once that loop has closed (a tick
        that ends while the server shuts down)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(callback)

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def fresh_sample(self, wait_s: float | None = None) -> Sample | None:
        """The latest sample of the running sampler (waits for its first one, at most
        ``wait_s``, by default ``snapshot_wait_s``)."""
        await self.ensure_running()
        if self._fresh_run != self._run:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, wait_s or self.config.snapshot_wait_s)
            except asyncio.TimeoutError:
                return None
        return self.latest

    async def scrape(self, wait_s: float) -> tuple[Sample | None, Mapping[str, DiskCounters]]:
        """What a Prometheus scrape exports: the latest finished sample and the disk counters
        read with it, from memory. A scrape holds the lease until the next one is due; only
        the first scrape of a stopped sampler waits (``wait_s`` at most) for a sample."""
        self.lease.scraped()
        # a start stuck past the wait (a slow NVML, a helper process) goes on by itself:
        # shielded, so a sampler it makes is kept, never leaked
        first = asyncio.ensure_future(self.fresh_sample(wait_s))
        try:
            sample = await asyncio.wait_for(asyncio.shield(first), wait_s + 0.5)
        except asyncio.TimeoutError:
            sample = self.latest if self._fresh_run == self._run else None
        sampler = self.sampler
        reader = disk_counters(sampler) if sampler is not None else None
        return sample, (reader() if reader is not None else {})

    # -- watched paths ---------------------------------------------------------------
    def watched(self) -> list[str]:
        return self.paths.paths()

    def roles(self) -> dict[str, list[str]]:
        return self.paths.roles()

    def _path_changed(self, key: str, watched: bool) -> None:
        """Tell the paths source when a path appears or vanishes, or changes owner: also
        while its sampler starts (its first tick may find a kernel's or a process's
        directory before the event loop holds the sampler), and never a closed one."""
        self._tell(self._paths_source, key, watched)
        if not watched:
            self.history.forget(key)  # memory follows what is watched now (issue 24)

    def _tell(self, source: Any, key: str, watched: bool) -> None:
        """Watch ``key`` in the paths ``source`` for its owner's quota (see
        WatchedPaths.owner), or stop watching it."""
        if source is None:
            return
        if not watched:
            source.remove(key)
            return
        owner = self.paths.owner(key)
        # a new path, or a watched one's new writer (or asker)
        source.add(key, owner=owner, requested=self.paths.requested(key))
        if owner is None:
            source.set_owner(key, None)  # its writer left, the path stays: ours again

    def add_user_path(self, path: str) -> str:
        return self.paths.add_user_path(path)

    def remove_path(self, path: str) -> bool:
        """Stop watching ``path`` whatever put it there; auto-roles will not bring it back."""
        return self.paths.remove(path)

    def _kernel_dirs(self, dirs: dict[str, str]) -> None:  # sampler thread
        self.paths.sync("kernel:", ((d, f"kernel:{kid}") for kid, d in dirs.items()))

    def _process_dirs(self, dirs: dict[str, set[int]]) -> None:  # sampler thread
        """Directories of training processes: one ``process:<pid>`` role per process."""
        self.paths.sync(
            "process:", ((d, f"process:{pid}") for d, pids in dirs.items() for pid in pids)
        )

    # -- training processes ----------------------------------------------------------
    def hidden_processes(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self._hidden)

    def hide_process(self, pid: int) -> bool:
        """Hide a listed training process: its row and its directories go (procfs reads
        only: safe on the event loop). False when no such process is listed."""
        latest = self.latest
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
