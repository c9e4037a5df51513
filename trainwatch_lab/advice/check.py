"""One-shot diagnosis of paths: ``trainwatch-lab check`` and the server's ``GET check``.

``core.paths.inspection.inspect_paths`` inspects the paths concurrently under one deadline: a dead
mount costs the timeout once, never a hang (a mount that answers may add the checkpoint
scan's and the probe's budgets, each capped at the timeout); a path that did not come back in
time is reported unresponsive from the mount table alone. Here: the verdict and the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from ..core.guard.guard import MountGuard
from ..core.history import History
from ..core.model import (
    SEVERITY_RANK,
    Alert,
    PathState,
    ProbeResult,
    Sample,
    Verdict,
    alert_from_json,
    path_state_from_json,
    probe_from_json,
)
from ..core.paths.inspection import inspect_paths
from ..core.paths.names import SPECIAL_FILE_TYPES, normalise
from .advisor import Advisor
from .registry import stateless_detectors

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
# after "probe" and "verdict": added to the ARCHITECTURE.md contract, never replacing a field;
# the space of df under the names watch --json gives them (free_bytes is statvfs f_bfree, the
# root reserve included: what a user can write is avail_bytes)
EXTRA_FIELDS = ("checked_at", "note", "avail_bytes", "used_bytes", "reserved_bytes")


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
            used = state.used_fraction
            entry["used_pct"] = None if used is None else 100.0 * used  # df's Use%
            paths.append(entry)
        return {"paths": paths, "warnings": [a.to_json() for a in self.alerts]}


def check_budget_s(timeout: float | None, defaults: Defaults = DEFAULTS) -> float:
    """How long a server gives one attached ``check`` before answering that it failed (a
    run_check ends by its own deadline well before: this bounds a helper that misbehaves).
    The client waits this and its ``attach_check_margin_s`` (core.defaults)."""
    limit = defaults.mount_timeout_s if timeout is None else float(timeout)
    return limit * 3 + defaults.probe_budget_s + 10.0


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
    inspection = inspect_paths(
        keys,
        deadline,
        defaults=d,
        probe=probe,
        guard=guard,
        late=f"no answer within {limit:g} s",
    )
    states, baseline = inspection.states, inspection.baseline
    sample = Sample(t=time.time(), paths={s.path: s for s in states})
    history = History(capacity=2)
    history.append(sample)
    advisor = Advisor(detectors=stateless_detectors(), defaults=d, baseline=lambda: baseline)
    alerts = advisor.evaluate(sample, history)
    return CheckReport(
        states=states,
        alerts=alerts,
        baseline=baseline,
        elapsed_s=time.monotonic() - started,
    )


def report_to_wire(report: CheckReport) -> dict[str, Any]:
    """The whole report as JSON, for a ``check`` that a Jupyter server runs for a terminal
    (server.attach): ``report_from_wire`` gives the same report back to print."""
    return {
        "states": [s.to_json() for s in report.states],
        "alerts": [a.to_json() for a in report.alerts],
        "baseline": report.baseline.to_json() if report.baseline is not None else None,
        "elapsed_s": report.elapsed_s,
        "verdicts": list(report.verdicts),
    }


def report_from_wire(data: dict[str, Any]) -> CheckReport:
    return CheckReport(
        states=[path_state_from_json(s) for s in data["states"]],
        alerts=[alert_from_json(a) for a in data["alerts"]],
        baseline=probe_from_json(data.get("baseline")),
        elapsed_s=float(data.get("elapsed_s") or 0.0),
        verdicts=list(data.get("verdicts") or []),
    )
