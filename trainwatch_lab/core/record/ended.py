"""What the system can tell about a process's end, read while it lives and once it ended.

At its end the kernel log (/dev/kmsg, as root) may name it: "Killed process PID".
At first sight we keep what only a live process shows: its start time, its stderr when that
is a regular file on a local filesystem and its own (nohup.out: read at the end for the
``Errno 28`` line; not a file it shares with the recording process, as a kernel shares the
Jupyter server's log, nor one other processes outside its own line write to), and its memory
cgroup with the OOM kills counted there so far. At its end an OOM kill
shows as that count going up: ``memory.events`` ``oom_kill`` (cgroup v2), ``memory.oom_control``
``oom_kill`` (cgroup v1, with ``memory.failcnt``). procfs and cgroupfs only: nothing here
can hang on a dead mount (the stderr file is read only on a local filesystem).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from typing import Any

from .. import hostfs
from ..processes.discovery import stat_fields
from ..storage.mounts import MountEntry, classify, mount_for_path, read_mounts
from ..storage.resolve import resolve_locally

CGROUP_DIR = "fs/cgroup"  # under /sys
KMSG = "/dev/kmsg"
KMSG_RECORDS = 8192  # the kernel's ring holds fewer; a bound all the same
TAIL_BYTES = 4096
TAIL_LINES = 5
KILLED = re.compile(r"Killed process (\d+) \(")
# the line before it: "oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/a,task_memcg=/a/b,
# task=python,pid=4242,uid=0" (Linux 5.0+): the cgroup whose limit was hit, for that pid
OOM_KILL = re.compile(r"oom-kill:.*?oom_memcg=(?P<memcg>[^,]*),.*?,pid=(?P<pid>\d+),")
OTHERS_KEPT = 3  # the OOM kills of other processes named in an end's record, at most


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def boot_time() -> float:
    text = _read(hostfs.current().proc("stat")) or ""
    for line in text.splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def started_at(pid: int) -> float | None:
    """The process's start as a Unix time (from its start ticks and the boot time)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return boot_time() + fields[1] / os.sysconf("SC_CLK_TCK")


def memory_cgroup(pid: int, root: str | None = None) -> dict[str, str] | None:
    """``{"version": "2"|"1", "dir": ...}`` of the process's memory cgroup, when visible
    (the host's pid and cgroup tree: core.hostfs)."""
    host = hostfs.current()
    root = root or host.sys(CGROUP_DIR)
    text = _read(host.proc(pid, "cgroup"))
    if not text:
        return None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            path = os.path.join(root, "memory", parts[2].lstrip("/"))
            if os.path.exists(os.path.join(path, "memory.oom_control")):
                return {"version": "1", "dir": path}
    for line in text.splitlines():
        if line.startswith("0::"):
            path = os.path.join(root, line[3:].lstrip("/"))
            if os.path.exists(os.path.join(path, "memory.events")):
                return {"version": "2", "dir": path}
    return None


def oom_kills(cgroup: dict[str, str] | None) -> int | None:
    """OOM kills counted in the cgroup so far (None when it is gone or says nothing)."""
    if not cgroup:
        return None
    name = "memory.events" if cgroup["version"] == "2" else "memory.oom_control"
    text = _read(os.path.join(cgroup["dir"], name))
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def _local_entry(entry: MountEntry) -> bool:
    return classify(entry) in ("local", "memory", "overlay")


def _local(path: str) -> bool:
    try:
        return _local_entry(mount_for_path(path, read_mounts()))
    except (LookupError, OSError):
        return False


def stderr_file(pid: int) -> str | None:
    """The file its stderr goes to, when that is a regular file on a local filesystem."""
    try:
        target = os.readlink(hostfs.current().proc(pid, "fd", "2"))
    except OSError:
        return None
    if not target.startswith("/") or target.endswith(" (deleted)") or not _local(target):
        return None
    try:
        link = hostfs.current().proc(pid, "fd", "2")
        return target if stat.S_ISREG(os.stat(link).st_mode) else None
    except OSError:
        return None


def _same_file(path: str, fd: int) -> bool:
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _logs_of_ours() -> list[int]:
    """The descriptors this process writes its own output and logs to: stdout, stderr and
    the files of the logging module's file handlers (the Jupyter server's log file)."""
    fds = [1, 2]
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):
            stream = getattr(handler, "stream", None)
            try:
                fds.append(stream.fileno())
            except (AttributeError, OSError, ValueError):
                continue
    return fds


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (one procfs pass)."""
    out: dict[int, int] = {}
    for name in os.listdir(hostfs.current().procfs):
        fields = stat_fields(int(name)) if name.isdigit() else None
        if fields is not None:
            out[int(name)] = fields[0]
    return out


def _line_of(pid: int, parents: dict[int, int]) -> set[int]:
    """``pid``, its ancestors and its descendants: the processes a run's own log may be
    shared with (a ``bash run.sh > log`` wrapper, DataLoader workers)."""
    line, up = {pid}, parents.get(pid, 0)
    while up > 1 and up not in line:
        line.add(up)
        up = parents.get(up, 0)
    below = {pid}
    while more := {p for p, pp in parents.items() if pp in below} - below:
        below |= more
    return line | below


def shared_with_others(pid: int, target: str) -> bool:
    """Whether a process outside ``pid``'s own line (its ancestors and descendants) writes
    ``target`` as its stdout or stderr: a log many processes share, whose last lines are not
    this one's. Compares link texts only: no file behind them is touched."""
    parents = _parents()
    line = _line_of(pid, parents)
    for other in parents.keys() - line:
        for fd in ("1", "2"):
            try:
                if os.readlink(hostfs.current().proc(other, "fd", fd)) == target:
                    return True
            except OSError:
                continue
    return False


def own_stderr(pid: int) -> str | None:
    """``stderr_file(pid)`` when it is the process's own: never the recording process's
    own output or log (a Jupyter server's kernels inherit its stderr: its last line is the
    server's log, "AsyncIOLoopKernelRestarter: restarting kernel"), nor a file written by
    processes outside its own line (a terminal or a pipe is no regular file already)."""
    target = stderr_file(pid)
    if target is None:
        return None
    link = hostfs.current().proc(pid, "fd", "2")
    if any(_same_file(link, fd) for fd in _logs_of_ours()) or shared_with_others(pid, target):
        return None
    return target


def stderr_facts(fd: int = 2) -> dict[str, Any]:
    """For ``run``, before it starts its command on this process's ``fd`` (its stderr):
    ``{"stderr": file, "stderr_from": its size now, "stderr_id": [dev, ino]}`` when that is
    a local regular file, else ``{"stderr": None}``. What was there before the start is
    someone else's. Read here, before the start, never from the command: one that ends at
    once is a zombie by the time a thread looks, and a zombie has no fd table to read."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")  # this process: never the host's /proc
    except OSError:
        return {"stderr": None}
    if not target.startswith("/") or target.endswith(" (deleted)") or not _local(target):
        return {"stderr": None}
    try:
        st = os.fstat(fd)  # local: no mount that can hang
    except OSError:
        return {"stderr": None}
    if not stat.S_ISREG(st.st_mode):
        return {"stderr": None}
    return {"stderr": target, "stderr_from": st.st_size, "stderr_id": [st.st_dev, st.st_ino]}


def appended(pid: int, fd: int = 2) -> bool:
    """Whether the process's ``fd`` was opened with O_APPEND (``>>``, nohup's nohup.out),
    from its fdinfo ``flags``: a file others may have written before it started."""
    text = _read(hostfs.current().proc(pid, "fdinfo", str(fd))) or ""
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return bool(int(line.split()[1], 8) & os.O_APPEND)
            except (IndexError, ValueError):
                return True
    return True


def own_from(pid: int, path: str | None) -> int | None:
    """Where the process's own lines begin in its stderr file: 0 for a file opened for it
    afresh (``> log``: the shell truncated it just before the run began), else its size at
    first sight (``>>``, nohup.out: what an earlier run appended is no evidence about this
    one; what this one wrote before it was first seen is lost with it)."""
    if not path or not _local(path):
        return None
    if not appended(pid):
        return 0
    try:  # the file it has open, through /proc: never a walk of the path its owner controls
        return os.stat(hostfs.current().proc(pid, "fd", "2")).st_size
    except OSError:
        return None


def file_identity(pid: int, fd: int = 2) -> list[int] | None:
    """``[st_dev, st_ino]`` of the file the process has open as ``fd``: at its end, the file
    read for its tail must be that one, not whatever its owner put under the name since."""
    try:
        st = os.stat(hostfs.current().proc(pid, "fd", str(fd)))
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _open_same(path: str, identity: list[int] | None) -> int | None:
    """``path`` opened for reading only when it is still the regular file ``identity`` names
    (when known), reached without touching a mount that can hang: each directory's mount
    judged before it is looked at, symlinks followed by hand (core.storage.resolve), the
    last name never followed (O_NOFOLLOW), and no wait on a FIFO put there (O_NONBLOCK).
    Its owner may have swapped any of it for a FIFO, a link to a hung share or to a file
    only root may read; the recorder runs as root, on the sampler's thread."""
    real = resolve_locally(path, read_mounts(), _local_entry, trusted=lambda _st: True)
    if real is None:
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        same = identity is None or [st.st_dev, st.st_ino] == list(identity)
        if stat.S_ISREG(st.st_mode) and same:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def tail(
    path: str | None,
    lines: int = TAIL_LINES,
    start: int | None = None,
    identity: list[int] | None = None,
) -> list[str]:
    """The last lines of a local regular file (at most TAIL_BYTES read), none written
    before offset ``start`` (the run's first sight: what an earlier run left is no
    evidence about this one; a file truncated since is read whole); nothing unless the
    file is still the one ``identity`` names (``_open_same``)."""
    if not path or not _local(path):
        return []
    fd = _open_same(path, identity)
    if fd is None:
        return []
    try:
        with os.fdopen(fd, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            first = 0 if start is None or start > size else start
            fh.seek(max(first, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    if size - first > TAIL_BYTES and text:
        text = text[1:]  # the first line was cut
    return [line[:300] for line in text if line.strip()][-lines:]


def _record(
    line: str, since: float | None, found: dict[int, tuple[str, str | None]], memcgs: dict[int, str]
) -> None:
    """One kernel log record ("PRI,SEQ,USEC,FLAGS;TEXT") into ``found``/``memcgs``."""
    head, _, text = line.partition(";")
    said = OOM_KILL.search(text)
    if said is not None:
        memcgs[int(said.group("pid"))] = said.group("memcg")
    match = KILLED.search(text)
    if match is None:
        return
    fields = head.split(",")
    try:
        at = boot_time() + int(fields[2]) / 1e6 if len(fields) > 2 else None
    except ValueError:
        at = None
    if since is None or at is None or at >= since - 1:
        victim = int(match.group(1))
        said_line = text.split(" total-vm", 1)[0].strip().rstrip(",")
        found[victim] = (said_line, memcgs.get(victim))


def kmsg_kills(since: float | None, path: str = KMSG) -> dict[int, tuple[str, str | None]] | None:
    """pid -> (the kernel log's "Killed process PID (...)" line, the memory cgroup whose
    limit was hit when the log says), of the OOM kills logged after ``since`` (a run's
    start: a pid reused later is another process); None when the log cannot be read (not
    root). /dev/kmsg is read without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    found: dict[int, tuple[str, str | None]] = {}
    memcgs: dict[int, str] = {}
    try:
        for _ in range(KMSG_RECORDS):
            try:
                record = os.read(fd, 8192).decode("utf-8", errors="replace")
            except BlockingIOError:
                break
            except OSError:  # EPIPE: a record overwritten while we read; go on
                continue
            if not record:
                break
            for line in record.splitlines():  # one record a read; a file: all at once
                if line.startswith(" "):  # a record's dictionary, not a record
                    continue
                _record(line, since, found, memcgs)
    finally:
        os.close(fd)
    return found


def kmsg_oom(pid: int, since: float | None, path: str = KMSG) -> str | None:
    """The kernel log's "Killed process PID (...)" line for this process, when readable
    and logged after ``since``."""
    found = (kmsg_kills(since, path) or {}).get(pid)
    return found[0] if found else None


def _within(cgroup: dict[str, str], memcg: str | None) -> bool:
    """Whether an OOM kill whose limit was ``memcg`` ("/a", as the kernel names it) could be
    in ``cgroup`` (``memory_cgroup``'s: /sys/fs/cgroup[/memory]/a/b): the limit is on it or
    above it; a log without the name could be anywhere, and is kept."""
    if memcg is None:
        return True
    mine = "/" + cgroup["dir"].rstrip("/").split("/fs/cgroup/", 1)[-1]
    if cgroup.get("version") == "1":  # the v1 hierarchy's own mount: /sys/fs/cgroup/memory
        mine = "/" + mine.split("/", 2)[-1] if mine.count("/") > 1 else "/"
    return memcg == "/" or mine == memcg or mine.startswith(memcg.rstrip("/") + "/")


def at_start(pid: int, stderr: bool = True) -> dict[str, Any]:
    """What to keep from a live process for the day it ends; ``stderr=False`` for a caller
    that knows the stderr file already (``run``: ``stderr_facts``), which spares a look at
    every process on the machine."""
    cgroup = memory_cgroup(pid)
    kept = {"started": started_at(pid), "cgroup": cgroup, "oom_kills": oom_kills(cgroup)}
    if stderr:
        target = own_stderr(pid)
        kept["stderr"] = target
        kept["stderr_from"] = own_from(pid, target)
        kept["stderr_id"] = file_identity(pid) if target else None
    return kept


def at_end(seen: dict[str, Any], kmsg: str | None = None) -> dict[str, Any]:
    """What its end shows, given what ``at_start`` kept: OOM kills since (and, when the
    count went up, whom the kernel log says the killer took), stderr's tail since."""
    facts: dict[str, Any] = {}
    before, after = seen.get("oom_kills"), oom_kills(seen.get("cgroup"))
    rose = before is not None and after is not None and after > before
    if rose:
        facts["oom_killed"] = {"cgroup": seen["cgroup"]["dir"], "before": before, "after": after}
    pid = seen.get("pid")
    kills = kmsg_kills(seen.get("started"), kmsg or KMSG) if pid or rose else None
    mine = kills.get(int(pid)) if kills is not None and pid else None
    if mine:
        facts["oom_logged"] = mine[0]
    if rose:
        facts["oom_log_read"] = kills is not None
        where = seen["cgroup"]
        others = [
            line for p, (line, memcg) in (kills or {}).items() if p != pid and _within(where, memcg)
        ]
        if others:
            facts["oom_others"] = others[-OTHERS_KEPT:]
    lines = tail(seen.get("stderr"), start=seen.get("stderr_from"), identity=seen.get("stderr_id"))
    if lines:
        facts["stderr_tail"] = lines
    return facts
