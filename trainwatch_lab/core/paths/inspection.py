"""Concurrent one-shot inspection of paths, bounded by one deadline.

Every path is inspected on its own daemon thread (each bounded by the mount guard), and the
local reference probe runs beside them: a dead mount costs the timeout once, never a hang. A
path whose inspection did not come back in time is described from the mount table alone,
which needs no syscall on the path. ``advice/check.py`` judges what comes back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..defaults import DEFAULTS, Defaults
from ..guard.guard import MountGuard, default_guard
from ..model import PathState, ProbeResult
from ..storage.blockdev import mount_answers_locally
from ..storage.mount_facts import apply_mount
from ..storage.mounts import mount_for_path, read_mounts
from ..storage.probe import local_baseline
from .look import inspect_path


@dataclass
class Inspection:
    states: list[PathState]  # one per key, in the order given
    baseline: ProbeResult | None  # the local reference measured at the same moment


def from_mount_table(path: str, error: str, responsive: bool = False) -> PathState:
    """A path whose inspection never came back (or failed): what /proc/self/mountinfo
    alone tells."""
    state = PathState(path=path, responsive=responsive, error=error)
    try:
        mounts = read_mounts()
        apply_mount(state, mount_for_path(path, mounts), mounts)
    except Exception:  # the mount table itself is unreadable: report what we have
        pass
    return state


def prestart(guard: MountGuard, keys: list[str], probe: bool) -> None:
    """Start every helper process at once, so that their start-up times overlap (none for a
    mount that answers locally: its calls run on our own threads, core.worker.inline)."""
    try:
        mounts = read_mounts()
    except OSError:
        return
    for key in keys:
        try:
            entry = mount_for_path(key, mounts)
        except LookupError:
            continue
        if guard.inline and mount_answers_locally(entry, mounts):
            continue
        guard.prestart(entry.mountpoint)  # one helper: the look, the scan and the probe lanes


def inspect_paths(
    keys: list[str],
    deadline: float,
    *,
    defaults: Defaults = DEFAULTS,
    probe: bool = True,
    guard: MountGuard | None = None,
    late: str = "no answer in time",
) -> Inspection:
    """Inspect normalised ``keys`` concurrently until ``deadline`` (``time.monotonic()``).

    With ``probe`` the local reference is measured beside them. A key with no answer by the
    deadline is described from the mount table with the error ``late``.
    """
    results: dict[str, PathState] = {}
    baseline_box: list[ProbeResult | None] = []
    guard = guard if guard is not None else default_guard()
    prestart(guard, keys, probe)

    def inspect(key: str) -> None:
        try:
            results[key] = inspect_path(key, defaults=defaults, probe=probe, guard=guard)
        except Exception as exc:  # a bug must not turn into a hang or a traceback
            results[key] = from_mount_table(key, f"{type(exc).__name__}: {exc}")

    def measure_baseline() -> None:
        try:
            baseline_box.append(local_baseline(defaults, guard))
        except Exception:
            baseline_box.append(None)

    threads = [
        threading.Thread(target=inspect, args=(k,), name=f"trainwatch-check {k}", daemon=True)
        for k in keys
    ]
    if probe:
        threads.append(
            threading.Thread(target=measure_baseline, name="trainwatch-baseline", daemon=True)
        )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))

    states = [results.get(k) or from_mount_table(k, late) for k in keys]
    return Inspection(states=states, baseline=baseline_box[0] if baseline_box else None)
