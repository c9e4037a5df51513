"""Find training processes that run outside the notebook: scripts in terminals, tmux, nohup.

Why: long runs rarely live in a notebook cell, yet their logdir on a share, the checkpoints
filling a disk and a GPU idling behind a blocked fsync are exactly what this tool is for. A
process counts when it holds a GPU (in NVML's process list, or with ``/dev/nvidia-uvm`` and a
``/dev/nvidiaN`` open: CUDA opens both, NVML-only tools such as nvidia-smi never open the first)
or has a TensorBoard event file (``events.out.tfevents.*``) or a checkpoint file open for
writing (``fdinfo`` flags), or closed a file it wrote under a watched path since the last pass
(``writers``, from fanotify as root: core.processes.writes; a plain script that only saves
a checkpoint every few seconds holds no file open long enough to be seen here).

One pass reads procfs only: the owner of ``/proc/PID`` and ``status`` (Uid), the ``fd`` links
(their text names the file; nothing behind it is ever looked at, so a dead mount cannot block
the scan), ``fdinfo`` of the few candidate files, ``cmdline``, ``cwd`` and ``stat``. Only
processes of our own user are looked at, every process when we run as root; of another user's
process nothing but the owner of its /proc directory is read. A ``Scanner`` reads the links of
new descriptors only, and all of them every few passes (most of a pass's cost). The sampler
source that runs passes on its own thread, within a CPU budget, is ``core.processes.source``.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from .. import hostfs
from ..defaults import CHECKPOINT_SUFFIXES
from ..redact import redact

EVENT_PREFIX = "events.out.tfevents."  # TensorBoard's event files (torch, TF, Lightning, HF)
_NVIDIA_MINOR = re.compile(r"/dev/nvidia(\d+)")
_UVM = "/dev/nvidia-uvm"
# A process with more descriptors than this is no training script (a browser, a database):
# its links are not all read, which bounds the cost of one pass.
MAX_FDS_READ = 4096
ANCESTOR_DEPTH = 32  # parents walked to fold a DataLoader worker into its script
COMMAND_CHARS = 60  # a command line shown in one row of the panel
FULL_EVERY = 5  # passes between two that read every descriptor's link again

WRITES = "writes a watched path"  # a file closed after writing there (core.processes.writes)
# in order of weight: the limit keeps the first
REASONS = ("gpu", "event file", "checkpoint", WRITES)
Writers = Mapping[int, Collection[str]]  # pid -> the watched paths it wrote under


@dataclass(slots=True)
class Found:
    """One training process as a pass saw it (its workers folded in)."""

    pid: int
    start: int  # start time in clock ticks since boot: with the pid, the process's identity
    ppid: int
    argv: list[str]
    cwd: str | None
    reasons: set[str] = field(default_factory=set)
    event_dirs: list[str] = field(default_factory=list)
    checkpoint_dirs: list[str] = field(default_factory=list)
    written_dirs: list[str] = field(default_factory=list)  # watched paths it wrote under
    gpu_minors: set[int] = field(default_factory=set)  # N of the /dev/nvidiaN it has open
    members: set[int] = field(default_factory=set)  # its pid and folded workers' pids

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.start)

    @property
    def command(self) -> str:
        return short_command(self.argv)

    def merge(self, other: Found) -> None:
        """Fold ``other`` (a worker, or a later pass) into this one; order is kept."""
        self.reasons |= other.reasons
        self.gpu_minors |= other.gpu_minors
        self.members |= other.members
        for mine, theirs in (
            (self.event_dirs, other.event_dirs),
            (self.checkpoint_dirs, other.checkpoint_dirs),
            (self.written_dirs, other.written_dirs),
        ):
            mine.extend(d for d in theirs if d not in mine)


@dataclass(slots=True)
class ScanResult:
    """What one pass found, and what it cost (the benchmark and the tests read these)."""

    found: dict[int, Found]
    looked_at: set[int]  # pids whose descriptors were read
    other_users: int  # processes left alone: not ours
    cpu_s: float  # CPU of the thread that ran the pass
    t: float


# -- pure parsing ----------------------------------------------------------------------------
def status_uid(text: str) -> int | None:
    """The real uid from the ``Uid:`` line of /proc/PID/status."""
    for line in text.split("\n"):  # not splitlines(): a process names itself (Name: "\x1eUid:")
        if line.startswith("Uid:"):
            parts = line.split()
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return None


def opened_for_writing(fdinfo: str) -> bool:
    """Whether an fdinfo text's ``flags:`` (octal open flags) say O_WRONLY or O_RDWR."""
    for line in fdinfo.splitlines():
        if line.startswith("flags:"):
            try:
                return int(line.split()[1], 8) & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
            except (IndexError, ValueError):
                return False
    return False


def file_kind(target: str) -> str | None:
    """ "event file" or "checkpoint" for an fd link's text that names one, else None."""
    if not target.startswith("/") or target.endswith(" (deleted)"):
        return None
    name = target.rsplit("/", 1)[-1]
    if name.startswith(EVENT_PREFIX):
        return "event file"
    if name.endswith(CHECKPOINT_SUFFIXES):
        return "checkpoint"
    return None


def short_command(argv: list[str], limit: int = COMMAND_CHARS) -> str:
    """``python train.py --lr 3e-4`` for one row: the program's and the script's names without
    their directories, secrets redacted (``--hf-token=***``: core.redact; this is the only
    form in which a command line leaves the process), control characters replaced, cut with
    an ellipsis past ``limit``."""
    if not argv:
        return "?"
    words = [os.path.basename(argv[0]) or argv[0], *argv[1:]]
    script = next((i for i, w in enumerate(words) if i and w.endswith(".py")), None)
    if script is not None:
        words[script] = os.path.basename(words[script]) or words[script]
    text = " ".join(words)
    text = redact("".join(c if c.isprintable() else "?" for c in text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def label(pid: int, command: str, what: str) -> str:
    """Where a watched path came from: "pid 4242 `python train.py --lr 3e-4`, event file"."""
    return f"pid {pid} `{command}`, {what}"


# -- procfs reads ----------------------------------------------------------------------------
def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def stat_fields(pid: int, proc: str | None = None) -> tuple[int, int] | None:
    """(parent pid, start ticks) from /proc/PID/stat (the host's: core.hostfs); None when
    it is gone."""
    data = _read(f"{proc or hostfs.current().procfs}/{pid}/stat")
    if not data:
        return None
    try:
        fields = data[data.rindex(b")") + 2 :].split()
        return int(fields[1]), int(fields[19])
    except (ValueError, IndexError):
        return None


def process_identity(pid: int, proc: str | None = None) -> tuple[int, int] | None:
    """(pid, start ticks): a pid reused by a new process is another identity."""
    fields = stat_fields(pid, proc)
    return (pid, fields[1]) if fields else None


Links = dict[str, str]  # fd -> its link's text when it may matter, "" for any other file


def _relevant(target: str) -> str:
    return target if target.startswith("/dev/nvidia") or file_kind(target) else ""


def _links(pid: int, proc: str, known: Links | None = None) -> Links | None:
    """The descriptors of ``pid`` (at most MAX_FDS_READ) and the links that may matter; the
    link of a descriptor in ``known`` is not read again. None when it cannot be read."""
    try:
        dfd = os.open(f"{proc}/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # gone, or not ours to read
        return None
    out: Links = {}
    try:
        for fd in os.listdir(dfd)[:MAX_FDS_READ]:
            if known is not None and fd in known:
                out[fd] = known[fd]
                continue
            with contextlib.suppress(OSError):  # closed meanwhile
                out[fd] = _relevant(os.readlink(fd, dir_fd=dfd))
    except OSError:
        return None
    finally:
        os.close(dfd)
    return out


def _look(
    pid: int, holders: Collection[int], proc: str, links: Links, writers: Writers | None = None
) -> Found | None:
    """The training signs of one process, or None when it shows none."""
    reasons: set[str] = set()
    events: list[str] = []
    checkpoints: list[str] = []
    minors: set[int] = set()
    uvm = False
    for fd, target in links.items():
        if not target:
            continue
        if target.startswith("/dev/nvidia"):
            match = _NVIDIA_MINOR.fullmatch(target)
            if match:
                minors.add(int(match.group(1)))
            uvm = uvm or target == _UVM
            continue
        kind = file_kind(target)
        if kind is None:
            continue
        info = _read(f"{proc}/{pid}/fdinfo/{fd}")
        if info is None or not opened_for_writing(info.decode(errors="replace")):
            continue
        reasons.add(kind)
        bucket = events if kind == "event file" else checkpoints
        directory = os.path.normpath(os.path.dirname(target))
        if directory not in bucket:
            bucket.append(directory)
    if pid in holders or (uvm and minors):
        reasons.add("gpu")
    written = sorted((writers or {}).get(pid, ()))
    if written:
        reasons.add(WRITES)
    if not reasons:
        return None
    fields = stat_fields(pid, proc)
    if fields is None:
        return None
    raw = _read(f"{proc}/{pid}/cmdline") or b""
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    try:
        cwd: str | None = os.readlink(f"{proc}/{pid}/cwd")
    except OSError:
        cwd = None
    return Found(
        pid, fields[1], fields[0], argv, cwd, reasons, events, checkpoints, written, minors, {pid}
    )


def _ours(pid: int, uid: int, proc: str) -> bool:
    """Whether ``pid`` runs as ``uid``: the owner of /proc/PID (its effective uid, what the
    kernel checks before showing its descriptors) first, cheaply, then status's real Uid."""
    try:
        if os.stat(f"{proc}/{pid}").st_uid != uid:
            return False
    except OSError:
        return False
    data = _read(f"{proc}/{pid}/status")
    return data is not None and status_uid(data.decode(errors="replace")) == uid


_UNDER_SKIPPED = -1


def _nearest(pid: int, found: dict[int, Found], skip_trees: Collection[int], proc: str) -> int:
    """The nearest found ancestor of ``pid``, 0 for none, _UNDER_SKIPPED under a skipped tree."""
    parent = found[pid].ppid
    for _ in range(ANCESTOR_DEPTH):
        if parent <= 1:
            return 0
        if parent in skip_trees:
            return _UNDER_SKIPPED
        if parent in found:
            return parent
        fields = stat_fields(parent, proc)
        if fields is None:
            return 0
        parent = fields[0]
    return 0


def in_trees(pid: int, trees: Collection[int], proc: str) -> bool:
    """Whether ``pid`` is one of ``trees`` or runs under one (its ancestors, read up to
    ANCESTOR_DEPTH): a process found before its kernel was known is the kernel's."""
    for _ in range(ANCESTOR_DEPTH + 1):
        if pid in trees:
            return True
        fields = stat_fields(pid, proc) if pid > 1 else None
        if fields is None:
            return False
        pid = fields[0]
    return False


def _fold(found: dict[int, Found], skip_trees: Collection[int], proc: str) -> dict[int, Found]:
    """Fold each process into its topmost found ancestor (DataLoader workers into their
    script); drop those under a pid of ``skip_trees`` (the server's kernels)."""
    up = {pid: _nearest(pid, found, skip_trees, proc) for pid in found}

    def top(pid: int) -> int:
        for _ in range(len(up) + 1):
            if up[pid] <= 0:
                return pid if up[pid] == 0 else _UNDER_SKIPPED
            pid = up[pid]
        return pid

    tops = {pid: top(pid) for pid in found}
    out = {pid: found[pid] for pid, t in tops.items() if t == pid}
    for pid, t in sorted(tops.items()):
        if t != pid and t in out:
            out[t].merge(found[pid])
    return out


class Scanner:
    """Passes that remember each process's descriptors: a pass reads the links of new
    descriptors only, and every link each ``full_every`` passes (a descriptor number closed
    and reused for another file, or a pid reused by another process, is seen by then). The
    links are most of a pass's cost; listing the descriptors is not avoidable."""

    def __init__(self, full_every: int = FULL_EVERY, proc: str | None = None) -> None:
        self.full_every = max(1, full_every)
        self.proc = proc or hostfs.current().procfs  # the host's pids (core.hostfs)
        self.passes = 0
        self._links: dict[int, Links] = {}

    def scan(
        self,
        holders: Collection[int] = (),
        skip_trees: Collection[int] = (),
        all_users: bool | None = None,
        clock: Callable[[], float] = time.thread_time,
        writers: Writers | None = None,
    ) -> ScanResult:
        """One pass over every process: those of our user (all when ``all_users``, by
        default when we are root) that hold a GPU (``holders``: NVML's pids), write event
        files or checkpoints, or wrote a file under a watched path (``writers``:
        core.processes.writes). Skips this process and the trees under ``skip_trees``."""
        c0, proc = clock(), self.proc
        full = self.passes % self.full_every == 0
        self.passes += 1
        uid, me = os.getuid(), os.getpid()
        every = os.geteuid() == 0 if all_users is None else all_users
        found: dict[int, Found] = {}
        fresh: dict[int, Links] = {}
        others = 0
        for name in os.listdir(proc):
            if not name.isdigit() or int(name) == me or int(name) in skip_trees:
                continue
            pid = int(name)
            if not every and not _ours(pid, uid, proc):
                others += 1
                continue
            links = _links(pid, proc, None if full else self._links.get(pid))
            if links is None:
                continue
            fresh[pid] = links
            item = _look(pid, holders, proc, links, writers)
            if item is not None:
                found[pid] = item
        self._links = fresh
        folded = _fold(found, set(skip_trees), proc)
        return ScanResult(folded, set(fresh), others, clock() - c0, time.time())


def scan(
    holders: Collection[int] = (),
    skip_trees: Collection[int] = (),
    all_users: bool | None = None,
    proc: str | None = None,
) -> ScanResult:
    """One full pass (see ``Scanner.scan``), remembering nothing."""
    return Scanner(1, proc).scan(holders, skip_trees, all_users)
