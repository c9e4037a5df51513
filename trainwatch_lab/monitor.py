"""Builds the one Sampler every surface uses (CLI ``watch``, notebook, server).

Sources run in this order: paths (resolves mounts and devices), disks (reads the devices the
paths resolved), process, gpus, main_thread (only while a GPU is underused), and with
``processes`` the training processes found on the machine (core.training_source), which add
their directories to the paths source. The Advisor evaluates every tick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .advice.advisor import Advisor
from .core.defaults import DEFAULTS, Defaults
from .core.diskstats import DiskStatsSource
from .core.gpu import GpuSource
from .core.history import History, capacity_for
from .core.paths import PathsSource
from .core.probe import local_baseline
from .core.process import ProcessIOSource
from .core.sampler import Sampler, Source
from .core.threadwait import MainThreadSource
from .core.training_source import FollowPaths, TrainingSource


def _gpu_sources(pid: int | None, defaults: Defaults, gpu: bool) -> list[Source]:
    """The GPUs, then where the main thread waits while one of them is underused (only when
    ``pid`` is this process: it names what a slow GPU waits for). Without GPUs, neither."""
    if not gpu:
        return []
    return [
        GpuSource(pid=pid, defaults=defaults),
        # both GPU rules that explain a slow GPU name where the loop waits: gpu-stalled
        # (near 0 %) and gpu-starved (a low mean)
        MainThreadSource(
            gpu_idle_below=max(defaults.gpu_idle_util_pct, defaults.gpu_starved_mean_util_pct)
        ),
    ]


def make_sampler(
    paths: Iterable[str] = (),
    *,
    pid: int | None = None,
    interval: float = DEFAULTS.interval_s,
    probe: bool = True,
    gpu: bool = True,
    defaults: Defaults = DEFAULTS,
    history_capacity: int | None = None,
    processes: bool = False,
) -> Sampler:
    """A ready (not started) Sampler watching ``paths`` and the process tree of ``pid``.

    ``history_capacity`` defaults to ``defaults.history_s`` worth of samples at ``interval``.
    ``processes``: also find training processes (scripts in terminals, tmux, nohup) and watch
    their log and checkpoint directories and working directories (``watch``/``serve``).
    """
    if not interval > 0 or not math.isfinite(interval):
        raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
    if history_capacity is None:
        history_capacity = capacity_for(defaults.history_s, interval, defaults)
    paths = tuple(paths)
    paths_source = PathsSource(paths=paths, defaults=defaults, probe=probe)
    sources: list[Source] = [
        paths_source,
        DiskStatsSource(),
        ProcessIOSource(pid=pid),
        *_gpu_sources(pid, defaults, gpu),
    ]
    if processes:
        gpus = next((s for s in sources if isinstance(s, GpuSource)), None)
        sources.append(
            TrainingSource(
                on_paths=FollowPaths(paths_source, paths),
                gpu_memory=gpus.process_memory if gpus is not None else None,
            )
        )
    advisor = Advisor(
        defaults=defaults,
        baseline=(lambda: local_baseline(defaults)) if probe else None,
    )
    return Sampler(
        sources,
        interval=interval,
        history=History(capacity=history_capacity),
        evaluate=advisor,
    )
