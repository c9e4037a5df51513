"""Why a run ended: one sentence with its evidence, from the recorded timeline.

Only what the evidence supports is a cause, and only evidence from the run's own lifetime
(``window``): a path of the run's at (almost) no free space in its last minutes, or a ``No
space left on device`` as the last line of its stderr (an earlier one followed by "loss is
nan" is not what ended it); an OOM kill the kernel log names it in; a mount that did not
answer; a GPU error. A run killed by a signal another process sent (kill -9) died of that,
whatever its disk held. Without such evidence the sentence says so ("ended; no cause seen")
and lists what is known (the exit status, the last stderr line), never a guess. A run that
exited 0 died of nothing (it exited normally, whatever its disks held), and an OOM kill that
names the run (the kernel log's line for its pid; where that log cannot be read, its own
SIGKILL with the cgroup's count) comes first; an OOM kill counted in its cgroup that the log
gives to another process is said as such.
A kernel shut down or restarted on request (the server's kernel manager was asked: the
kernel-ended event's ``requested``) was shut down, not dead: no cause, and not ``badly``,
the one rule the panel's cards and the notebook's replay both follow.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..defaults import DEFAULTS
from .store import Event, Store

LOOK_BACK_S = 120.0  # the timeline this long before the end is "at that moment" ...
# ... and this long after: what a dead process wrote stays, and the reading that shows a
# disk full often comes a few seconds late (the sampler's own statvfs and probe wait on a
# disk busy flushing); the sentence gives each reading's own time
LOOK_AFTER_S = 30.0
FULL_BYTES = 1024 * 1024  # a filesystem with less than this available is full for a writer
ENOSPC = re.compile(r"Errno 28|No space left on device|ENOSPC")
SAVE_EVENT = "save-"  # fix.checkpoint.events' kinds
DISK_WARNINGS = ("disk-filling", "disk-almost-full", "checkpoint-wont-fit")
ENDED_KINDS = ("process-ended", "run-ended", "kernel-ended")
SAME_START_S = 2.0  # two records of one process: their start times (from its start ticks
# or, for the run wrapper, the clock just after it started the child) this close


@dataclass(slots=True)
class Ending:
    """One run's end as recorded: by the discovery (process-ended), the ``run`` wrapper
    (run-ended, with the exit status), or both merged."""

    name: str
    pid: int
    t: float
    data: dict[str, Any]
    sentence: str = ""
    cause: str | None = None
    evidence: list[str] = field(default_factory=list)
    of_kernel: bool = False  # a kernel's end (the kernels source's record is among its own)
    saves: list[str] = field(default_factory=list)  # what its saves did on a full disk

    @property
    def badly(self) -> bool:
        """Whether it ended badly (a card, a red mark): a cause seen, or an end neither
        clean (exit status 0) nor asked for (a kernel shut down or restarted on request)."""
        code = (self.data.get("exit") or {}).get("code")
        return self.cause is not None or not (code == 0 or self.data.get("requested"))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "t": self.t,
            "sentence": self.sentence,
            "cause": self.cause,
            "evidence": self.evidence,
            "saves": self.saves,
            "exit": self.data.get("exit"),
            "started": self.data.get("started"),
            "requested": self.data.get("requested"),
            "badly": self.badly,
            # which run it was (a card names them: three "python ended" are told apart)
            "command": self.data.get("command"),
            "cwd": self.data.get("cwd"),
            "notebook": self.data.get("notebook"),
        }


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def duration(seconds: float) -> str:
    """``5 h 10 m``, ``12 m 5 s``, ``40 s``."""
    s = int(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} m"
    if s >= 60:
        return f"{s // 60} m {s % 60} s"
    return f"{s} s"


def size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


ASKED_BY = {
    "client": "asked from JupyterLab or another client",
    "server": "the Jupyter server was shutting down",
    "culler": "culled by the server after being idle",
}
DONE = {"shutdown": "was shut down", "restart": "was restarted"}


def asked(data: dict[str, Any]) -> tuple[str, str] | None:
    """``("was shut down", "asked from JupyterLab or another client")`` for an end that was
    asked of the server's kernel manager; None for any other."""
    action = data.get("requested")
    if not action:
        return None
    by = ASKED_BY.get(str(data.get("asked_by")), "asked of the server")
    return DONE.get(str(action), "was stopped"), by


def _same_process(a: Ending, pid: int, started: Any, t: float) -> bool:
    """Whether an end recorded as (``pid``, ``started``, ``t``) is ``a``'s process: the same
    pid started at the same moment (whoever recorded it, whenever it was noticed); without
    both starts, the same pid ending within a minute."""
    if a.pid != pid:
        return False
    mine = a.data.get("started")
    if isinstance(mine, (int, float)) and isinstance(started, (int, float)):
        return abs(mine - started) < SAME_START_S
    return abs(a.t - t) < 60


def endings(store: Store, since: float, until: float) -> list[Ending]:
    """Every run that ended in the window, one ending per process: the records of one
    process (pid and start time) by the wrapper (run-ended, the exact end and status), the
    discovery (process-ended) and the kernels source (kernel-ended: a kernel's process the
    discovery found too) are one; a kernel's name and facts win over the discovery's."""
    out: list[Ending] = []
    for event in store.events(since, until, kinds=ENDED_KINDS):
        pid = int(event.data.get("pid") or 0)
        started = event.data.get("started")
        twin = next((e for e in out if _same_process(e, pid, started, event.t)), None)
        if twin is None:
            kernel = event.kind == "kernel-ended"
            out.append(Ending(event.subject, pid, event.t, dict(event.data), of_kernel=kernel))
            continue
        if event.kind == "run-ended":  # the wrapper knows the exact end and the status
            twin.t = event.t
        # None or empty says nothing (the wrapper's "paths": [] is "not known", never "none")
        news = {k: v for k, v in event.data.items() if v is not None and v != [] and v != {}}
        if event.kind == "kernel-ended":
            twin.name, twin.of_kernel = event.subject, True
        elif twin.of_kernel:  # the discovery's record adds, never overrides
            news = {k: v for k, v in news.items() if twin.data.get(k) is None}
        twin.data = {**twin.data, **news}
    return out


def _related(path: str, own: set[str]) -> bool:
    """Whether ``path`` is one of the run's own paths, or above or below one (its mount
    point, a subdirectory): the same tree, where the run's writes land."""
    return any(
        path == o or path.startswith(o.rstrip("/") + "/") or o.startswith(path.rstrip("/") + "/")
        for o in own
    )


def window(ending: Ending) -> tuple[float, float]:
    """The moments whose readings are evidence about this end: the minutes before it (never
    before the run started: a disk another run filled and freed, a directory deleted before
    this one began, say nothing about it) and the seconds after."""
    started = ending.data.get("started")
    lo = ending.t - LOOK_BACK_S
    if isinstance(started, (int, float)):
        lo = max(lo, min(started, ending.t))
    return lo, ending.t + LOOK_AFTER_S


Least = tuple[str, float, float, float | None]  # path, least available bytes, when, its size


def _least(store: Store, ending: Ending) -> list[Least]:
    """(path, least available bytes, when, size) per watched path in the run's last minutes
    (``window``), the run's own paths (and those above or below them) first, then by free
    space; of paths equally full (one filesystem), the run's own path, then the shortest,
    never whichever the store happened to list first."""
    own = set(ending.data.get("paths") or [])
    found = []
    keys = store.keys("path:*:avail_bytes")
    sizes = [k.replace(":avail_bytes", ":total_bytes") for k in keys]
    columns = store.read(keys + sizes, *window(ending))
    for key in keys:
        ts, vs = columns.get(key, ([], []))
        pairs = [(v, t) for t, v in zip(ts, vs, strict=True) if v == v]
        if pairs:
            least, when = min(pairs)
            total = [v for v in columns.get(key.replace(":avail_", ":total_"), ([], []))[1]]
            size_ = max(total) if total else None
            found.append((key[len("path:") : -len(":avail_bytes")], least, when, size_))
    found.sort(key=lambda f: (not _related(f[0], own), f[1], f[0] not in own, len(f[0]), f[0]))
    return found


def _full(found: Least, nospace: bool) -> bool:
    """Whether a path was full: under FULL_BYTES available; with a ``No space left on
    device`` in the run's stderr, also under the share of its size a large write cannot
    fit in (a 4 MiB save fails on ext4 with 1.5 MB still free: its reserve and metadata),
    never more than ``why_nearly_full_max_bytes`` (79.7 GB free is no full disk)."""
    least, total = found[1], found[3]
    if least < FULL_BYTES:
        return True
    if not nospace or not total:
        return False
    return least < min(DEFAULTS.why_nearly_full_share * total, DEFAULTS.why_nearly_full_max_bytes)


def _full_paths(store: Store, ending: Ending, nospace: bool = False) -> list[Least]:
    """The watched paths that were full (``_full``) before the end; when the run's own
    paths are known, only theirs: another run's full disk (the discovery watches every
    training process on the machine) is no evidence about this one. When they are not
    (a ``run`` wrapper's run the discovery did not see), every full one: the caller may
    name them, never as the cause."""
    own = set(ending.data.get("paths") or [])
    full = [f for f in _least(store, ending) if _full(f, nospace)]
    return [f for f in full if _related(f[0], own)] if own else full


def _least_own(store: Store, ending: Ending) -> Least | None:
    """The run's own watched path (or one above or below it) with the least free space
    before the end; None when none of its paths was recorded."""
    own = set(ending.data.get("paths") or [])
    found = [f for f in _least(store, ending) if _related(f[0], own)]
    return found[0] if found else None


def _enospc_last(stderr: list[str]) -> str | None:
    """The stderr tail's last line when it says ``No space left on device``: the error the
    run ended on. An earlier one (caught, retried, followed by "loss is nan") is not."""
    last = next((line for line in reversed(stderr) if line.strip()), None)
    return last if last is not None and ENOSPC.search(last) else None


def _oom_evidence(data: dict[str, Any], cause: str | None) -> str:
    """The cgroup's count, and whom the kernel log says the OOM killer took when not this
    run (another process in its cgroup, or a log that names no one)."""
    oom = data["oom_killed"]
    text = f"oom_kill {oom['before']} -> {oom['after']} in cgroup {oom['cgroup']}"
    if cause is not None:
        return text
    others = data.get("oom_others") or []
    if others:
        return f"{text}: another process there was killed (kernel log: {others[-1]})"
    if data.get("oom_log_read"):
        return f"{text}: the kernel log names another process, not this one"
    return f"{text} (another process there may have been the one killed)"


def _warned(events: list[Event], code_set: tuple[str, ...], subject: str | None) -> Event | None:
    for e in events:
        wanted = subject is None or e.subject == subject
        if e.kind == "warning-raised" and e.data.get("code") in code_set and wanted:
            return e
    return None


def _sent(events: list[Event], warned: Event) -> str | None:
    """The webhook format a warning's start was delivered to ("slack"), if it was."""
    for e in events:
        if (
            e.kind == "notification-sent"
            and e.t >= warned.t
            and e.subject == warned.subject
            and e.data.get("code") == warned.data.get("code")
            and e.data.get("state") == "started"
        ):
            return str(e.data.get("format"))
    return None


def _save_notes(events: list[Event], pid: int) -> list[str]:
    """What the run's saves did when the disk was full (fix.checkpoint.events: room made, a
    fallback taken, a pause, a resume, giving up), each at its time: a run that lived on
    says why it did; one that died paused says where it waited."""
    notes, paused = [], None
    for e in events:
        if not e.kind.startswith(SAVE_EVENT) or int(e.data.get("pid") or 0) != pid:
            continue
        if e.kind == SAVE_EVENT + "paused":
            paused = e
            continue
        if e.kind in (SAVE_EVENT + "resumed", SAVE_EVENT + "gave-up"):
            paused = None
        notes.append(f"{clock(e.t)} {e.text}")
    if paused is not None:
        notes.append(f"{clock(paused.t)} {paused.text} (still waiting at the end)")
    return notes


def explain(store: Store, ending: Ending) -> Ending:
    """Fill ``ending.sentence``, ``cause`` and ``evidence`` (see the module doc)."""
    data = ending.data
    started = data.get("started")
    before = store.events((started or ending.t - 86_400) - 1, ending.t + 5)
    stderr = [line for line in data.get("stderr_tail") or []]
    nospace = next((line for line in reversed(stderr) if ENOSPC.search(line)), None)
    cause: str | None = None
    evidence: list[str] = []
    own = set(data.get("paths") or [])
    full_anywhere = _full_paths(store, ending, nospace is not None)
    # with its paths unknown, a full disk is some run's, maybe not this one's: said, not blamed
    full = full_anywhere if own else []
    exit_info = data.get("exit") or {}
    clean = exit_info.get("code") == 0
    oom, logged = data.get("oom_killed"), data.get("oom_logged")
    signal = exit_info.get("signal")
    killed = signal == "SIGKILL"
    # an OOM kill counted in a cgroup it shares with others names no process: only the
    # kernel log's line for its pid does, or, where that log could not be read (not root),
    # its own SIGKILL with the count; such a kill is the end whatever the disks held, and a
    # run that exited 0 died of nothing; nor did a kernel shut down on request, unless the
    # OOM killer came first
    settled = clean or bool(data.get("requested"))
    oom_cause = bool(logged or (oom and killed and not data.get("oom_log_read")))
    # a full disk ends a run through a failed write (an exception, an exit status), never
    # through a signal another process sent (kill -9 by an admin); SIGBUS is a write to a
    # mapped file on a full disk, SIGXFSZ a file over its size limit
    by_signal = bool(signal) and signal not in ("SIGBUS", "SIGXFSZ")
    disk_cause = not oom_cause and not settled and not by_signal
    last_nospace = _enospc_last(stderr)
    if oom_cause:
        cause = "the kernel's out-of-memory killer ended it"
        if not logged:
            evidence.append("the kernel log, readable as root, was not read")
    elif disk_cause and full and (nospace or _related(full[0][0], own)):
        path, least, when, _ = full[0]
        cause = f"{path} was full"
        evidence.append(f"{size(least)} free at {clock(when)}")
        warned = _warned(before, DISK_WARNINGS, path)
        if warned is not None:
            told = f"{warned.data.get('code')} warned at {clock(warned.t)[:5]}"
            sent = _sent(before, warned)
            evidence.append(told + (f" and was sent to {sent}" if sent else ""))
        if nospace:
            evidence.append(f"stderr: {nospace.strip()}")
    elif disk_cause and last_nospace:
        # no watched path of its was full: the disk that was is not watched (/dev/shm, /tmp)
        cause = "it ran out of disk space"
        evidence.append(f"stderr: {last_nospace.strip()}")
        least = _least_own(store, ending)
        if least is not None:
            path, free, when, _ = least
            evidence.append(
                f"not on its watched {path}, whose least free space was {size(free)} "
                f"at {clock(when)}"
            )
    if full_anywhere and not oom_cause and not settled and (cause is None or not own):
        path, least, when, _ = full_anywhere[0]
        whose = "" if own else "a watched path, maybe another run's: "
        evidence.append(f"{whose}{path} was full ({size(least)} free at {clock(when)})")
    if oom:
        evidence.append(_oom_evidence(data, cause))
    if logged:
        evidence.append(f"kernel log: {logged}")
    if cause is None and not settled:
        dead = _warned(before, ("mount-unresponsive",), None)
        if dead is not None and dead.subject in own:
            cause = f"{dead.subject} stopped answering"
            evidence.append(f"mount-unresponsive since {clock(dead.t)}")
    if cause is None and not settled:
        gpu = _warned(before, ("gpu-error",), None)
        if gpu is not None:
            cause = f"GPU {gpu.subject} reported an error"
            evidence.append(gpu.text)
    status = _status(data.get("exit"))
    if status:
        evidence.insert(0, status) if cause is None else evidence.append(status)
    if cause is None and stderr:
        evidence.append(f"last stderr line: {stderr[-1].strip()}")
    head = f"{ending.name} ended at {clock(ending.t)}"
    if started:
        head += f" after {duration(ending.t - started)}"
    request = asked(data)
    if request is not None and cause is not None:  # asked, but something else came first
        when = data.get("asked_at")
        evidence.append(request[1] + (f" at {clock(when)}" if when else ""))
    if cause is not None:
        sentence = f"{head}: {cause} ({'; '.join(evidence)})"
    elif request is not None:
        done, by = request
        sentence = f"{ending.name} {done} at {clock(ending.t)}"
        sentence += f" after {duration(ending.t - started)}" if started else ""
        sentence += f" ({'; '.join([by, *evidence])})"
    elif clean:
        sentence = f"{head}: it exited normally (status 0)"
    else:
        sentence = f"{head}; no cause seen" + (f" ({'; '.join(evidence)})" if evidence else "")
    saves = _save_notes(before, ending.pid)
    if saves:
        sentence += "; its saves: " + "; ".join(saves)
    ending.sentence, ending.cause, ending.evidence, ending.saves = sentence, cause, evidence, saves
    return ending


def _status(exit_info: dict[str, Any] | None) -> str | None:
    if not exit_info:
        return None
    if exit_info.get("signal"):
        return f"killed by {exit_info['signal']}"
    return f"exit status {exit_info.get('code')}"
