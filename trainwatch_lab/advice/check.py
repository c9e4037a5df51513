"""One-shot diagnosis of paths: ``trainwatch-lab check`` and the server's ``GET check``.

Every path is inspected on its own daemon thread (each bounded by the mount guard), and the
whole check has one deadline: a dead mount costs the timeout once, never a hang (a mount that
answers may add the checkpoint scan's and the probe's budgets, each capped at the timeout).
A path whose inspection did not come back in time is reported unresponsive from the mount
table alone, which needs no syscall on the path.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from ..core.guard import PROBE_LANE, MountGuard, default_guard
from ..core.history import History
from ..core.model import SEVERITY_RANK, Alert, PathState, ProbeResult, Sample, Verdict
from ..core.mounts import mount_for_path, read_mounts
from ..core.paths import (
    SCAN_LANE,
    SPECIAL_FILE_TYPES,
    apply_mount,
    inspect_path,
    normalise,
    scan_key,
)
from ..core.probe import local_baseline
from .advisor import Advisor
from .storage import STATELESS_STORAGE_DETECTORS

SLACK_S = 0.5  # what the check may take beyond its timeout (threads, process start)
PATH_FIELDS = (
    "path",
    "mountpoint",
    "fstype",
    "source",
    "device",
    "shared",
    "read_only",
    "total_bytes",
    "free_bytes",
)
# after "probe" and "verdict": added to the ARCHITECTURE.md contract, never replacing a field
EXTRA_FIELDS = ("checked_at", "note")


def verdict_for(state: PathState, alerts: list[Alert]) -> Verdict:
    """One word per path; the worst thing we know about it wins."""
    mine = {a.code for a in alerts if a.subject == state.path}
    if not state.responsive or "mount-unresponsive" in mine:
        return "unresponsive"
    if not state.exists and state.checked_at is None:
        return "missing"  # no such path can exist (ELOOP, a file in the way, EACCES)
    # (a path not created yet is judged by its nearest existing ancestor: its filesystem)
    if state.kind == "pseudo" or state.file_type in SPECIAL_FILE_TYPES:
        return "not-storage"  # /dev/vda, a FIFO, /proc/self: never probed
    if "slow-mount" in mine:
        return "slow"
    if state.shared or "shared-mount" in mine:
        return "shared"
    return "ok"


@dataclass
class CheckReport:
    states: list[PathState]
    alerts: list[Alert]
    baseline: ProbeResult | None = None
    elapsed_s: float = 0.0
    verdicts: list[Verdict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.verdicts:
            self.verdicts = [verdict_for(s, self.alerts) for s in self.states]

    @property
    def missing(self) -> list[str]:
        return [s.path for s, v in zip(self.states, self.verdicts, strict=False) if v == "missing"]

    @property
    def exit_code(self) -> int:
        """0 when nothing of severity ``warning`` or above was found, else 1."""
        worst = max((SEVERITY_RANK[a.severity] for a in self.alerts), default=0)
        return 1 if worst >= SEVERITY_RANK["warning"] else 0

    def to_json(self) -> dict[str, Any]:
        """The ``check --json`` object of ARCHITECTURE.md, plus ``checked_at`` (where the
        path was looked at and probed: itself, or its nearest existing ancestor when it is
        not created yet) and ``note`` (the line the human output prints beside it)."""
        paths = []
        for state, verdict in zip(self.states, self.verdicts, strict=False):
            entry: dict[str, Any] = {name: getattr(state, name) for name in PATH_FIELDS}
            measured = state.probe is not None and state.probe.samples > 0
            entry["probe"] = state.probe.to_json() if measured else None  # type: ignore[union-attr]
            entry["verdict"] = verdict
            entry.update((name, getattr(state, name)) for name in EXTRA_FIELDS)
            paths.append(entry)
        return {"paths": paths, "warnings": [a.to_json() for a in self.alerts]}


def _from_mount_table(path: str, error: str, responsive: bool = False) -> PathState:
    """A path whose inspection never came back (or failed): what /proc/self/mountinfo
    alone tells."""
    state = PathState(path=path, responsive=responsive, error=error)
    try:
        mounts = read_mounts()
        apply_mount(state, mount_for_path(path, mounts), mounts)
    except Exception:  # the mount table itself is unreadable: report what we have
        pass
    return state


def _prestart(guard: MountGuard, keys: list[str], probe: bool) -> None:
    """Start every helper process at once, so that their start-up times overlap."""
    try:
        mounts = read_mounts()
    except OSError:
        return
    for key in keys:
        try:
            mountpoint = mount_for_path(key, mounts).mountpoint
        except LookupError:
            continue
        guard.prestart(mountpoint)
        guard.prestart(scan_key(mountpoint), SCAN_LANE)
        if probe:
            guard.prestart(mountpoint, PROBE_LANE)


def run_check(
    paths: list[str] | tuple[str, ...],
    *,
    probe: bool = True,
    timeout: float | None = None,
    defaults: Defaults = DEFAULTS,
    guard: MountGuard | None = None,
) -> CheckReport:
    """Inspect ``paths`` concurrently and run the stateless storage rules on the result.

    ``guard`` defaults to the process-wide one, so that a long-lived caller (the server)
    checking a dead mount again gets the answer at once instead of one more stuck helper.
    """
    started = time.monotonic()
    keys = list(dict.fromkeys(normalise(p) for p in paths))
    limit = defaults.mount_timeout_s if timeout is None else float(timeout)
    d = replace(
        defaults,
        mount_timeout_s=limit,
        probe_budget_s=min(defaults.probe_budget_s, limit),
        checkpoint_scan_budget_s=min(defaults.checkpoint_scan_budget_s, limit),
    )
    extra = d.checkpoint_scan_budget_s + (d.probe_budget_s if probe else 0.0)
    deadline = started + limit + extra + SLACK_S
    results: dict[str, PathState] = {}
    baseline_box: list[ProbeResult | None] = []
    guard = guard if guard is not None else default_guard()
    _prestart(guard, keys, probe)

    def inspect(key: str) -> None:
        try:
            results[key] = inspect_path(key, defaults=d, probe=probe, guard=guard)
        except Exception as exc:  # a bug must not turn into a hang or a traceback
            results[key] = _from_mount_table(key, f"{type(exc).__name__}: {exc}")

    def measure_baseline() -> None:
        try:
            baseline_box.append(local_baseline(d, guard))
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

    late = f"no answer within {limit:g} s"
    states = [results.get(k) or _from_mount_table(k, late) for k in keys]
    baseline = baseline_box[0] if baseline_box else None
    sample = Sample(t=time.time(), paths={s.path: s for s in states})
    history = History(capacity=2)
    history.append(sample)
    advisor = Advisor(detectors=STATELESS_STORAGE_DETECTORS, defaults=d, baseline=lambda: baseline)
    alerts = advisor.evaluate(sample, history)
    return CheckReport(
        states=states,
        alerts=alerts,
        baseline=baseline,
        elapsed_s=time.monotonic() - started,
    )
