"""Events from consecutive samples: what changed, in words, for the recorded timeline.

Warnings raised and cleared (with their text), training processes seen and ended (with
what the system says of the end, core.record.ended), checkpoint saves, mount changes and
kernels started, restarted and ended. Pure bookkeeping over Samples plus a few procfs reads
per new or vanished process: cheap enough for the sampler thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..model import Sample
from ..processes.discovery import process_identity
from . import ended
from .proc_connector import ProcExits
from .store import Event
from .why import asked


def run_name(argv: list[str]) -> str:
    """``train.py`` for ``python /x/train.py --lr 3``; the program's name otherwise: what a
    run is called in the events and in the sentence of its end."""
    script = next((w for w in argv[1:] if w.endswith(".py")), None)
    return os.path.basename(script or (argv[0] if argv else "?")) or "?"


def kernel_label(name: str, notebook: str | None) -> str:
    """``python3 of runs/train.ipynb``: a kernel as its user knows it."""
    return f"{name} of {notebook}" if notebook else name


KernelAsked = Callable[[str, int | None], dict[str, Any] | None]


class EventWatch:
    """Remembers the last sample's state and says what changed in the next one. With
    ``exits`` (core.record.proc_connector, as root) a process's or kernel's end carries its
    exit status and the moment it ended, as the kernel reported them. ``asked(kernel id,
    pid)``: what was asked of the kernel manager for that process's end (the server's
    server.kernel_requests: ``{"requested": "shutdown"|"restart", "asked_by", "asked_at"}``),
    None when its end was not asked for."""

    def __init__(self, exits: ProcExits | None = None, asked: KernelAsked | None = None) -> None:
        self.exits = exits
        self.asked = asked
        self.warnings: dict[tuple[str, str], Any] = {}
        self.processes: dict[int, dict[str, Any]] = {}  # pid -> what was kept at first sight
        self.checkpoints: dict[str, float] = {}
        self.mounts: dict[str, tuple[Any, ...]] = {}
        self.kernels: dict[str, Any] = {}

    def observe(self, sample: Sample) -> list[Event]:
        t = sample.t
        out: list[Event] = []
        out += self._warnings(sample, t)
        out += self._processes(sample, t)
        out += self._paths(sample, t)
        out += self._kernels(sample, t)
        return out

    def _warnings(self, sample: Sample, t: float) -> list[Event]:
        out = []
        now = {a.key: a for a in sample.warnings}
        for key, alert in now.items():
            if key not in self.warnings:
                out.append(
                    Event(
                        t,
                        "warning-raised",
                        alert.subject,
                        f"{alert.code}: {alert.message}",
                        alert.to_json(),
                    )
                )
        for key, alert in self.warnings.items():
            if key not in now:
                out.append(
                    Event(
                        t,
                        "warning-cleared",
                        alert.subject,
                        f"{alert.code} cleared",
                        {"code": alert.code, "severity": alert.severity},
                    )
                )
        self.warnings = now
        return out

    def _processes(self, sample: Sample, t: float) -> list[Event]:
        out = []
        listed = {p.pid: p for p in sample.processes}
        for pid, proc in listed.items():
            identity = process_identity(pid)
            known = self.processes.get(pid)
            if known is not None and known["start_ticks"] == (identity or (0, None))[1]:
                continue
            if identity is None:
                continue
            kept = {
                "pid": pid,
                "start_ticks": identity[1],
                "command": proc.command,
                "name": run_name(proc.command.split()),
                "cwd": proc.cwd,
                "reasons": proc.reasons,
                "paths": sorted(proc.paths),
                **ended.at_start(pid),
            }
            self.processes[pid] = kept
            self._watch(pid)
            out.append(
                Event(
                    t,
                    "process-seen",
                    kept["name"],
                    f"{kept['name']} (pid {pid}) is training: {', '.join(proc.reasons)}",
                    kept,
                )
            )
        for pid, kept in list(self.processes.items()):
            if pid in listed:
                continue
            identity = process_identity(pid)
            if identity is not None and identity[1] == kept["start_ticks"]:
                continue  # alive, just not listed now (closed its files, hidden)
            del self.processes[pid]
            facts = ended.at_end(kept)
            at, status = self._exit_of(pid, t)
            data = {**kept, **facts, **status, "last_seen": kept.get("last_seen", t), "ended": at}
            out.append(
                Event(at, "process-ended", kept["name"], f"{kept['name']} (pid {pid}) ended", data)
            )
        for pid in listed:
            if pid in self.processes:
                self.processes[pid]["last_seen"] = t
        return out

    def _paths(self, sample: Sample, t: float) -> list[Event]:
        out = []
        for path, state in sample.paths.items():
            mount = (state.mountpoint, state.fstype, state.source)
            before = self.mounts.get(path)
            if state.mountpoint is not None:
                if before is not None and before != mount:
                    out.append(
                        Event(
                            t,
                            "mount-changed",
                            path,
                            f"{path} is now on {state.fstype} {state.source} at "
                            f"{state.mountpoint} (was {before[1]} {before[2]})",
                            {"was": list(before), "now": list(mount)},
                        )
                    )
                self.mounts[path] = mount
            ck = state.checkpoints
            if ck is not None:
                seen = self.checkpoints.get(path)
                if seen is not None and ck.newest_mtime > seen:
                    out.append(
                        Event(
                            ck.newest_mtime,
                            "checkpoint",
                            path,
                            f"checkpoint saved: {ck.newest_path} "
                            f"({ck.newest_bytes / 2**20:.1f} MiB)",
                            ck.to_json(),
                        )
                    )
                self.checkpoints[path] = ck.newest_mtime
        return out

    def _kernels(self, sample: Sample, t: float) -> list[Event]:
        """Kernels started, restarted (its old process ended) and ended; each end with what
        the system says of it (an OOM kill in its cgroup), as a process's end has."""
        out = []
        for kid, info in sample.kernels.items():
            before = self.kernels.get(kid)
            pid, notebook = info.get("pid"), info.get("notebook")
            what = kernel_label(info.get("name") or kid, notebook)
            named = {"notebook": notebook} if notebook else {}
            if before is None:
                out.append(
                    Event(
                        t,
                        "kernel-started",
                        kid,
                        f"kernel {what} started",
                        {"pid": pid, "cwd": info.get("cwd"), **named},
                    )
                )
            elif before.get("pid") != pid and pid:
                out.append(self._kernel_end(kid, before, t))
                out.append(
                    Event(
                        t,
                        "kernel-restarted",
                        kid,
                        f"kernel {what} restarted",
                        {"pid": pid, "was": before.get("pid"), **named},
                    )
                )
            else:
                if notebook and before.get("notebook") != notebook:  # its session came (or
                    before.update(notebook=notebook, name=what)  # was renamed) since
                continue
            self.kernels[kid] = {
                "pid": pid,
                "name": what,
                **named,
                **(ended.at_start(pid) if pid else {}),
            }
            if pid:
                self._watch(pid)
        for kid in set(self.kernels) - set(sample.kernels):
            out.append(self._kernel_end(kid, self.kernels.pop(kid), t))
        return out

    def _kernel_end(self, kid: str, kept: dict[str, Any], t: float) -> Event:
        name = f"kernel {kept.get('name') or kid}"
        at, status = self._exit_of(kept.get("pid"), t)
        request = self.asked(kid, kept.get("pid")) if self.asked is not None else None
        data = {**kept, **ended.at_end(kept), **status, "kernel": kid, "name": name, "ended": at}
        data.update(request or {})
        said = asked(data)
        text = f"{name} (pid {kept.get('pid')}) " + (f"{said[0]} ({said[1]})" if said else "ended")
        return Event(at, "kernel-ended", name, text, data)

    # -- exit statuses (the process connector) ----------------------------------------
    def _watch(self, pid: int) -> None:
        if self.exits is not None:
            self.exits.watch(pid)

    def _exit_of(self, pid: int | None, t: float) -> tuple[float, dict[str, Any]]:
        """When ``pid`` ended and ``{"exit": ...}`` when the kernel said how (else the
        sample's time and nothing: today's record without the connector)."""
        found = self.exits.take(pid) if self.exits is not None and pid else None
        if found is None:
            return t, {}
        return min(found.t, t), {"exit": found.to_json()}

    def close(self) -> None:
        """Stop listening for the exits of the processes and kernels still watched."""
        if self.exits is not None:
            pids = set(self.processes) | {k["pid"] for k in self.kernels.values() if k.get("pid")}
            self.exits.forget(pids)
