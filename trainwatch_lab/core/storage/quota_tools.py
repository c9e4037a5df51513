"""Quotas that only a tool can read: Lustre (``lfs quota``) and NFS (rquota through ``quota``).

Neither filesystem answers ``quotactl``: a Lustre client asks its servers through ``lfs``, an
NFS client asks the server's ``rpc.rquotad`` (Debian's ``quota`` package). Both are
programs that may wait on a server for as long as it likes, so each runs on a thread of its
own, never on the caller's: the first read of a mount waits ``quota_tool_wait_s`` for it,
every later read gets the last answer at once while a fresh run (at most every
``quota_tool_every_s``) goes on in the background; a run is killed after
``quota_tool_timeout_s``. ``core.storage.quota.read_quotas`` calls in here, inside the mount's guard
helper (the tool touches the mount too), so a tool that hangs costs its thread and says so,
and never makes the mount look unresponsive.

Both tools print the same columns after the mount point (block counts in KiB):
``used[*] soft hard grace files[*] soft hard grace``: ``lfs`` prints them as
``print_quota`` of lustre/utils/lfs.c does (``-q``: no title; a mount point longer than 15
characters on a line of its own; an inaccurate value in ``[brackets]``), ``quota -w -p
--show-mntpoint --hide-device`` as ``showquotas`` of quota-tools' quota.c does (``-p``: the
grace as a number, so the row always has eight fields; a user with no limit anywhere gets
``Disk quotas for user x (uid 1): none``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..defaults import DEFAULTS, Defaults
from .fstypes import fs_magic
from .mounts import mount_for_dev, read_mounts

LUSTRE_SUPER_MAGIC = 0x0BD00BD0  # lustre/include/uapi/linux/lustre/lustre_user.h
NFS_SUPER_MAGIC = 0x6969  # <linux/magic.h>
# statfs f_type -> the tool that reads its quotas (a test adds tmpfs here to drive a fake one)
TOOL_BY_MAGIC = {LUSTRE_SUPER_MAGIC: "lfs", NFS_SUPER_MAGIC: "quota"}
KIB = 1024
FIELDS = 8  # used, soft, hard, grace for blocks, then for files
# the kinds each asks for: rquota knows users and groups only
TOOL_KINDS = {"lfs": ("user", "group", "project"), "quota": ("user", "group")}


def tool_quotas(fd: int, path: str, ids: dict[str, int | None]) -> dict[str, Any] | None:
    """``read_quotas``'s answer for a file open on Lustre or NFS (``fd``, at ``path``), from
    its tool; None for any other filesystem (``quotactl`` reads those)."""
    tool = TOOL_BY_MAGIC.get(fs_magic(fd) or 0)
    if tool is None:
        return None
    if shutil.which(tool) is None:
        return {"quotas": [], "none": f"`{tool}` is not installed (only it reads quotas here)"}
    entry = mount_for_dev(os.fstat(fd).st_dev, path, read_mounts())
    if entry is None:
        return {"quotas": [], "none": "its mount point is not in the mount table"}
    return shared_tool_quotas().read(tool, entry.mountpoint, ids)


def command(tool: str, kind: str, qid: int, mountpoint: str) -> list[str]:
    """The command line that prints one kind's row for ``mountpoint`` (ids as numbers: both
    tools take a number for a name made of digits)."""
    flag = {"user": "-u", "group": "-g", "project": "-p"}[kind]
    if tool == "lfs":
        return ["lfs", "quota", "-q", flag, str(qid), mountpoint]
    # -w: no wrapped rows; -p: grace as a number; -v: a row even with nothing used; -Q: no
    # complaint when rquotad refuses (no rquotad is "no quota", said by us)
    return [
        "quota", "-w", "-p", "-v", "-Q", "--show-mntpoint", "--hide-device",
        f"--filesystem={mountpoint}", flag, str(qid),
    ]  # fmt: skip


def tool_name(tool: str) -> str:
    return "lfs quota" if tool == "lfs" else tool


def _number(token: str) -> int | None:
    """A count as printed: ``123``, ``123*`` (over the limit), ``[123]`` (inaccurate)."""
    text = token.strip("[]*")
    return int(text) if text.isdigit() else None


def first_limit(soft: int, hard: int) -> int | None:
    """The limit that stops writes first (0 means none)."""
    limits = [x for x in (soft, hard) if x]
    return min(limits) if limits else None


def parse_row(text: str, mountpoint: str) -> dict[str, int | None] | None:
    """The figures of ``mountpoint``'s row in ``lfs quota -q`` or ``quota -w -p
    --show-mntpoint --hide-device`` output; None when there is no such row."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped != mountpoint and not stripped.startswith(mountpoint + " "):
            continue
        rest = stripped[len(mountpoint) :].split()
        if not rest and i + 1 < len(lines):  # lfs: a long mount point on a line of its own
            rest = lines[i + 1].split()
        if len(rest) < FIELDS:
            continue
        used, bsoft, bhard = (_number(t) for t in rest[0:3])
        files, isoft, ihard = (_number(t) for t in rest[4:7])
        if None in (used, bsoft, bhard, files, isoft, ihard):
            continue
        byte_limit = first_limit(bsoft or 0, bhard or 0)
        return {
            "limit_bytes": None if byte_limit is None else byte_limit * KIB,
            "used_bytes": (used or 0) * KIB,
            "inode_limit": first_limit(isoft or 0, ihard or 0),
            "inodes_used": files or 0,
        }
    return None


def _first_line(raw: bytes, tool: str) -> str:
    """What went wrong, in the tool's own first words ("quota: Mountpoint (or device) /x
    not found or has no quota enabled.")."""
    lines = raw.decode(errors="replace").strip().splitlines()
    return lines[0].strip().removeprefix(f"{tool}: ") if lines else ""


@dataclass
class _Mount:
    """What one mount's tool last said, and the run under way."""

    answer: dict[str, Any] | None = None
    at: float = 0.0  # monotonic, when ``answer`` was made
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class ToolQuotas:
    """The tool runs of one process (a guard helper, or ours for a mount read in place)."""

    def __init__(self, defaults: Defaults = DEFAULTS) -> None:
        self.defaults = defaults
        self._lock = threading.Lock()
        self._mounts: dict[tuple[Any, ...], _Mount] = {}

    def read(self, tool: str, mountpoint: str, ids: dict[str, int | None]) -> dict[str, Any]:
        """``read_quotas``'s answer from ``tool``: the last one, or the first within
        ``quota_tool_wait_s``; never waits on a run that a read before this one started.
        Before the first run ends the answer has ``"pending": True``: a slow tool is not
        "no quota", and its answer comes with a later read."""
        wanted = {k: v for k, v in ids.items() if v is not None and k in TOOL_KINDS[tool]}
        key = (tool, mountpoint, tuple(sorted(wanted.items())))
        with self._lock:
            m = self._mounts.setdefault(key, _Mount())
        with m.lock:
            stale = m.answer is None or time.monotonic() - m.at >= self.defaults.quota_tool_every_s
            first = m.thread is None
            if stale and (m.thread is None or not m.thread.is_alive()):
                m.thread = threading.Thread(
                    target=self._run, args=(m, tool, mountpoint, wanted), daemon=True,
                    name=f"trainwatch-quota {tool} {mountpoint}",
                )  # fmt: skip
                m.thread.start()
            thread = m.thread
        if first:
            thread.join(self.defaults.quota_tool_wait_s)
        with m.lock:
            if m.answer is not None:
                return m.answer
        wait = self.defaults.quota_tool_wait_s
        return {  # pending: no answer yet, which says nothing of the quota (not "no quota")
            "quotas": [],
            "none": f"`{tool_name(tool)}` did not answer within {wait:g} s",
            "pending": True,
        }

    def _run(self, m: _Mount, tool: str, mountpoint: str, ids: dict[str, int]) -> None:
        quotas: list[dict[str, Any]] = []
        why: list[str] = []
        deadline = time.monotonic() + self.defaults.quota_tool_timeout_s
        for kind, qid in ids.items():
            row, problem = self._one(command(tool, kind, qid, mountpoint), deadline, mountpoint)
            if problem is not None:
                why.append(problem)
                if "did not answer" in problem:
                    break  # the server is not answering: the other kinds would not either
            elif row is None or (row["limit_bytes"] is None and row["inode_limit"] is None):
                why.append(f"no {kind} limit")
            else:
                quotas.append({"kind": kind, "id": qid, **row})
        answer = {"quotas": quotas, "none": None if quotas else "; ".join(why) or "no quota"}
        with m.lock:
            m.answer, m.at = answer, time.monotonic()

    def _one(
        self, argv: list[str], deadline: float, mountpoint: str
    ) -> tuple[dict[str, int | None] | None, str | None]:
        """One tool run: ``(row, None)``, or ``(None, why)`` when it failed or hung."""
        name = tool_name(argv[0])
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd="/", start_new_session=True,
                env={**os.environ, "LC_ALL": "C"},  # untranslated words
            )  # fmt: skip
        except OSError as exc:
            return None, f"`{name}` could not run: {exc.strerror or exc}"
        with _running_lock:
            _running.add(proc)
        try:
            out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=1.0)  # (a tool stuck in the kernel is left behind)
            timeout = self.defaults.quota_tool_timeout_s
            return None, f"`{name}` did not answer within {timeout:g} s"
        finally:
            with _running_lock:
                _running.discard(proc)
        row = parse_row(out.decode(errors="replace"), mountpoint)
        if row is None and proc.returncode != 0:  # quota exits 1 when over a limit: row first
            return None, f"`{name}`: {_first_line(err, argv[0]) or f'status {proc.returncode}'}"
        return row, None


_shared: ToolQuotas | None = None
_shared_lock = threading.Lock()
# tool runs in flight: the guard's helper that runs them may be told to leave (SIGTERM) while
# one hangs on a dead server; each runs in its own session, so its group goes with us
_running: set[subprocess.Popen[bytes]] = set()
_running_lock = threading.Lock()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the tool and its children


@atexit.register
def _kill_running() -> None:
    with _running_lock:
        for proc in list(_running):
            _kill(proc)


def shared_tool_quotas() -> ToolQuotas:
    """This process's tool runs: a guard helper lives on between ticks, and so do they."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ToolQuotas()
        return _shared
