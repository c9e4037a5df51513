"""Builds the one Sampler every surface uses (CLI ``watch``/``serve``, notebook, server).

Sources run in this order: paths (resolves mounts and devices), disks (reads the devices the
paths resolved), process (the tree of ``pid``), gpus, main_thread (only while a GPU is
underused), the caller's own sources (``more_sources``: the server's kernels) and with
``processes`` the training processes found on the machine (core.processes.source), which add
their directories to the watched paths, and the time each of them loses to storage
(``TrainingWaits``: core.processes.waits per row). The Advisor evaluates every tick.

Every surface states what it needs here, rather than editing a built Sampler: the server
keeps one History across restarts (``history``), watches no process of its own
(``process=False``: it trains nothing) and follows discovered directories with its own
bookkeeping (``Discovery.on_paths``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from .advice.advisor import Advisor
from .advice.io_bound import IO_BOUND_DETECTORS
from .core.attach.link import HubLink
from .core.attach.source import HubSource
from .core.defaults import DEFAULTS, Defaults
from .core.gpu.select import as_selection
from .core.gpu.source import GpuSource
from .core.history import History, capacity_for
from .core.model import Sample
from .core.paths.source import PathsSource
from .core.processes.io import ProcessIOSource
from .core.processes.source import (
    MAX_PATHS,
    MAX_PROCESSES,
    FollowPaths,
    Identity,
    OnPaths,
    TrainingSource,
)
from .core.processes.threadwait import MainThreadSource
from .core.processes.waits import WaitSource
from .core.record.location import choose
from .core.record.past import RecordedPast
from .core.sampler import Sampler, Source
from .core.storage.diskstats import DiskStatsSource
from .core.storage.probe import local_baseline

RELAY_LATE = 2.5  # an attached kernel ticks by itself when no server sample came in 2.5 ticks
GpuMemory = Callable[[], dict[int, int]]  # pid -> GPU memory in bytes (GpuSource)
MoreSources = Callable[[GpuMemory | None], Iterable[Source]]


@dataclass(frozen=True)
class Discovery:
    """How training processes found on the machine are followed (``processes=``).

    ``on_paths`` receives the directories to watch (dir -> the pids they came from); None
    adds them to the sampler's own paths source. ``skip_trees`` names pids whose trees are
    reported elsewhere (the server's kernels), ``hidden`` the identities a user hid."""

    on_paths: OnPaths | None = None
    skip_trees: Callable[[], Collection[int]] | None = None
    hidden: Callable[[], Collection[Identity]] | None = None
    max_processes: int = MAX_PROCESSES
    max_paths: int = MAX_PATHS
    waits: bool = True  # measure each listed process's time lost to storage (TrainingWaits)


class TrainingWaits:
    """The time each training process found loses to the watched paths (issue 15: the
    panel's rows), from a core.processes.waits WaitSource per listed process fed that process's row
    (``row.io``: its waits, its workers' apart). Runs after the training source; a process
    no longer listed has its looks stopped. Reading another user's process needs ptrace
    rights: without them its row just has no waits."""

    name = "training_waits"

    def __init__(self, defaults: Defaults = DEFAULTS) -> None:
        self.defaults = defaults
        self._sources: dict[int, WaitSource] = {}

    def collect(self, sample: Sample) -> None:
        live: dict[int, WaitSource] = {}
        for row in sample.processes:
            if row.io is None or row.io.pid != row.pid:
                continue
            source = self._sources.pop(row.pid, None)
            if source is None:
                source = WaitSource(pid=row.pid, defaults=self.defaults)
            live[row.pid] = source
            source.collect(Sample(t=sample.t, paths=sample.paths, process=row.io))
        self.close()
        self._sources = live

    def close(self) -> None:
        for source in self._sources.values():
            source.close()
        self._sources = {}


def _gpu_sources(
    pid: int | None, defaults: Defaults, gpu: bool | Sequence[int | str], process: bool
) -> list[Source]:
    """The GPUs (``gpu``: True for all, or the selection to show), then where the main
    thread waits while one of them is underused (only when the watched process is this one:
    it names what a slow GPU waits for). Without GPUs, neither; without a watched process,
    no main thread."""
    if not gpu:
        return []
    select = None if gpu is True else as_selection(list(gpu))  # type: ignore[arg-type]
    sources: list[Source] = [GpuSource(pid=pid, defaults=defaults, select=select)]
    if process:
        # both GPU rules that explain a slow GPU name where the loop waits: gpu-stalled
        # (near 0 %) and gpu-starved (a low mean)
        sources.append(
            MainThreadSource(
                gpu_idle_below=max(defaults.gpu_idle_util_pct, defaults.gpu_starved_mean_util_pct)
            )
        )
    return sources


def make_sampler(
    paths: Iterable[str] = (),
    *,
    pid: int | None = None,
    process: bool = True,
    interval: float = DEFAULTS.interval_s,
    probe: bool = True,
    gpu: bool | Sequence[int | str] = True,
    waits: bool | None = None,
    defaults: Defaults = DEFAULTS,
    history: History | None = None,
    history_capacity: int | None = None,
    processes: bool | Discovery = False,
    more_sources: MoreSources | None = None,
    clock: Callable[[], float] = time.time,
    past_store: str | None = None,
) -> Sampler:
    """A ready (not started) Sampler watching ``paths`` and the process tree of ``pid``.

    ``process=False`` watches no process tree at all (no I/O rates, no main thread): a
    server or an agent that trains nothing saves those reads every tick. ``history`` is
    used as it is (a surface that restarts its sampler keeps its charts); otherwise a new
    one holds ``history_capacity`` samples, by default ``defaults.history_s`` worth at
    ``interval``. ``processes``: also find training processes (scripts in terminals, tmux,
    nohup) and watch their log, checkpoint and working directories; a ``Discovery`` says
    how. ``clock`` stamps each sample (a test that ticks by hand passes its own).
    ``more_sources(gpu_memory)`` returns sources to run after the built-in ones, given
    the GPU source's per-process memory reader (None without GPUs). ``waits``: measure the
    share of its time the process loses to each watched path (core.processes.waits, a thread
    sampling
    at ``defaults.wait_rate_hz``); by default exactly when ``pid`` is given. ``gpu``: True
    for every GPU, False for none, or the GPUs to show (indices, GPU or MIG UUIDs).
    ``past_store``: the recorded history whose free-space readings a fill judged from less
    than ``fill_window_s`` of this sampler's own also reads (core.record.past); None: the
    machine's (core.record.location.choose), "" for none.
    """
    if not interval > 0 or not math.isfinite(interval):
        raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
    if history is None:
        if history_capacity is None:
            history_capacity = capacity_for(defaults.history_s, interval, defaults)
        history = History(capacity=history_capacity)
    paths = tuple(paths)
    paths_source = PathsSource(paths=paths, defaults=defaults, probe=probe, owner=pid)
    sources: list[Source] = [paths_source, DiskStatsSource()]
    if process:
        sources.append(ProcessIOSource(pid=pid))
    sources += _gpu_sources(pid, defaults, gpu, process)
    gpus = next((s for s in sources if isinstance(s, GpuSource)), None)
    gpu_memory = gpus.process_memory if gpus is not None else None
    if more_sources is not None:
        sources += more_sources(gpu_memory)
    if processes:
        how = processes if isinstance(processes, Discovery) else Discovery()
        sources += _training_sources(how, paths_source, paths, gpu_memory, defaults)
    # time lost to storage by path (core.processes.waits): where ``pid`` names the training process
    # (the notebook passes its own, ``watch``/``serve --pid`` another); not for an agent
    tree = next((s for s in sources if isinstance(s, ProcessIOSource)), None)
    if tree is not None and (waits if waits is not None else pid is not None):
        sources.append(WaitSource(pid=pid, defaults=defaults, members=lambda: tree.members))
    advisor = Advisor(
        defaults=defaults,
        baseline=(lambda: local_baseline(defaults)) if probe else None,
        past=_recorded_past(past_store, defaults),
    )
    return Sampler(sources, interval=interval, history=history, evaluate=advisor, clock=clock)


def make_attached_sampler(
    link: HubLink,
    paths: Iterable[str] = (),
    *,
    pid: int | None,
    defaults: Defaults = DEFAULTS,
    history_capacity: int | None = None,
) -> Sampler:
    """A kernel's Sampler that reads its Jupyter server's (core.attach): the paths, disks,
    GPUs and their warnings come from the server's one sampler and Advisor (``HubSource``),
    so every view tells one story and nothing here touches a filesystem. What only this
    process can see well stays here: its process tree's I/O, where its main thread waits,
    and the share of time it loses to each path (``io-bound``, judged here over them).
    Ticks with the server's sampler: on each of its samples."""
    interval = link.interval
    if history_capacity is None:
        history_capacity = capacity_for(defaults.history_s, interval, defaults)
    hub = HubSource(link, paths)
    sources: list[Source] = [hub]
    if pid is not None:  # (a terminal's ``watch`` without --pid watches no process)
        tree = ProcessIOSource(pid=pid)
        sources += [
            tree,
            MainThreadSource(
                gpu_idle_below=max(defaults.gpu_idle_util_pct, defaults.gpu_starved_mean_util_pct)
            ),
            WaitSource(pid=pid, defaults=defaults, members=lambda: tree.members),
        ]
    advisor = Advisor(IO_BOUND_DETECTORS, defaults=defaults, given=lambda: hub.warnings)
    history = History(capacity=history_capacity)
    # ticks when a server sample arrives; its own clock only when the server is late
    sampler = Sampler(
        sources,
        interval=interval,
        history=history,
        evaluate=advisor,
        unprompted_s=interval * RELAY_LATE,
    )
    hub.follow(lambda _sample: sampler.poke())
    return sampler


def _recorded_past(path: str | None, defaults: Defaults) -> RecordedPast | None:
    """The reader of the recorded free space, on the store at ``path`` (None: where this
    machine records); None when no local directory could hold one. The file need not exist
    yet: a reader finds no past until a recorder has written it."""
    if path is None:
        try:
            path = choose().path
        except LookupError:
            return None
    return RecordedPast(path, defaults) if path else None


def _training_sources(
    how: Discovery,
    paths_source: PathsSource,
    fixed: tuple[str, ...],
    gpu_memory: GpuMemory | None,
    defaults: Defaults,
) -> list[Source]:
    """Training processes found on this machine (``how`` says which), their directories
    added to ``paths_source`` beside the ``fixed`` ones (unless ``how.on_paths`` takes them),
    and, when ``how.waits``, the time each loses to storage."""
    sources: list[Source] = [
        TrainingSource(
            on_paths=how.on_paths or FollowPaths(paths_source, fixed),
            gpu_memory=gpu_memory,
            skip_trees=how.skip_trees,
            hidden=how.hidden,
            max_processes=how.max_processes,
            max_paths=how.max_paths,
        )
    ]
    if how.waits:
        sources.append(TrainingWaits(defaults))
    return sources
