"""Read/write rates of the training process and its children (DataLoader workers, tools).

``*_chars`` count every read/write syscall, so they include network and FUSE filesystems
that never reach a local block device; ``*_bytes`` only what reached the block layer. The
pair tells "the job writes a lot" apart from "the job's writes hit the disk".

Counting a tree is subtle: when a child exits and is reaped, Linux folds its lifetime
counters into the parent's (``wait()`` adds them to the parent's signal->ioac). Summing
live processes naively therefore makes rates dip negative when a child vanishes and spike
when it is reaped. We keep per-process deltas instead, and when a child vanishes we
remember what we already counted for it and subtract that from its parent's next jump.

Watching ourselves must not show up as the job's I/O: when the watched process is this one,
the sampler thread's own reads (/proc, /sys) are subtracted through /proc/thread-self/io, and
the mount guard's helper processes are left out of the tree.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Container
from dataclasses import dataclass

import psutil

from .. import hostfs
from ..guard.guard import helper_pids
from ..model import ProcessIO, Sample
from ..procfile import ProcFiles, read_once

FIELDS = ("read_chars", "write_chars", "read_bytes", "write_bytes")
Counts = tuple[int, int, int, int]
Key = tuple[int, int]  # (pid, start time in clock ticks): a reused pid is another process
ZERO: Counts = (0, 0, 0, 0)
# readings a credit waits for its parent's jump: the reap may land one reading after the
# child vanished; a parent that ignores SIGCHLD never gets the jump, so credits must expire
CREDIT_READINGS = 3


@dataclass(slots=True)
class _Seen:
    counts: Counts
    parent: Key | None


def _sub(a: Counts, b: Counts) -> Counts:
    return tuple(max(0, x - y) for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def _add(a: Counts, b: Counts) -> Counts:
    return tuple(x + y for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


Read = Callable[[str], bytes]


def _stat_fields(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks since boot) from /proc/PID/stat.

    Not psutil's create_time: that adds /proc/stat's btime, which moves when the wall clock
    is adjusted, and would make a long-running process look new (and all its past I/O
    look recent)."""
    data = read_once(f"{hostfs.procfs()}/{pid}/stat")
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def _parse_io(data: bytes) -> Counts:
    """The four counters we chart, from the text of a /proc/.../io file."""
    parts = data.split()
    values = dict(zip(parts[::2], parts[1::2], strict=False))
    return (
        int(values.get(b"rchar:", 0)),
        int(values.get(b"wchar:", 0)),
        int(values.get(b"read_bytes:", 0)),
        int(values.get(b"write_bytes:", 0)),
    )


def _thread_counts(read: Read = read_once) -> Counts | None:
    """I/O of the calling thread (the sampler's). By thread id rather than through
    /proc/thread-self, whose kept descriptor would stay with the thread that opened it."""
    try:
        return _parse_io(read(f"/proc/self/task/{threading.get_native_id()}/io"))
    except (OSError, ValueError):
        return None


def _own_counts(read: Read = read_once) -> dict[int, Counts]:
    """I/O of the calling thread and of every other thread trainwatch runs here
    (core.processes.waits
    reads /proc ten times a second: not the job's reads either), by thread id."""
    me = threading.get_native_id()
    counts = {me: c} if (c := _thread_counts(read)) is not None else {}
    for tid in _our_thread_ids() - {me}:
        with contextlib.suppress(OSError, ValueError):
            counts[tid] = _parse_io(read_once(f"/proc/self/task/{tid}/io"))
    return counts


_HAS_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


# Every thread trainwatch starts is named so. They start no process but the mount guard's
# helpers, which the tree leaves out anyway: their children files need no reading.
OUR_THREADS = "trainwatch-"


def _our_thread_ids() -> set[int]:
    return {
        t.native_id
        for t in threading.enumerate()
        if t.name.startswith(OUR_THREADS) and t.native_id is not None
    }


def _descendants(
    pid: int,
    read: Read = read_once,
    skip: Container[int] = (),
    quiet: Container[int] = (),
    read_leader: Read = read_once,
) -> list[int]:
    """Every descendant of ``pid`` but those in ``skip`` (and theirs), found through
    /proc/PID/task/TID/children: the cost grows with the tree, not with the machine's
    process count (psutil's children() reads the stat file of every process on the
    machine). psutil where the kernel lacks the file (CONFIG_PROC_CHILDREN). Threads in
    ``quiet`` are known to start no process that counts: their files are not read.
    ``read_leader`` reads the children of ``pid``'s own main thread (the one that forks
    DataLoader workers; its id lives as long as the process, so a kept descriptor is safe)."""
    if not _HAS_CHILDREN_FILES:
        try:
            kids = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return []
        return [p.pid for p in kids if p.pid not in skip]  # their children stay (rare)
    found: list[int] = []
    stack = [pid]
    seen = {pid}
    proc = hostfs.procfs()  # the host's pids (core.hostfs)
    while stack:
        parent = stack.pop()
        try:
            tids = os.listdir(f"{proc}/{parent}/task")
        except OSError:
            continue  # exited meanwhile
        for tid in tids:
            if int(tid) in quiet:
                continue
            reader = read_leader if parent == pid and tid == str(pid) else read
            try:
                kids = [int(k) for k in reader(f"{proc}/{parent}/task/{tid}/children").split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in seen and kid not in skip:
                    seen.add(kid)
                    stack.append(kid)
                    found.append(kid)
    return found


def _boot_clock() -> float:
    """Seconds since boot on the clock that /proc/PID/stat start times use."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class ProcessIOSource:
    """Fills ``sample.process`` with the I/O rates of a process and (by default) all its
    descendants.

    The first reading has nothing to compare with: it reports rates of 0.0 (not None), so
    that ``sample.process`` exists from the first tick for sources that annotate it. A
    process that exists at one reading and not the next contributes nothing further; a
    child born and gone between two readings is counted through its parent once reaped.
    """

    name = "process"

    def __init__(
        self,
        pid: int | None = None,
        children: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.children = children
        self.clock = clock
        self._seen: dict[Key, _Seen] = {}
        # what was already counted for vanished children, expected in their parent's jump,
        # with the readings it may still wait
        self._credit: dict[Key, tuple[Counts, int]] = {}
        self._prev_t: float | None = None
        self._prev_boot_clock = 0.0
        self._prev_self: dict[int, Counts] | None = None  # our threads' I/O, by thread id
        self._self_now: dict[int, Counts] | None = None
        self._lock = threading.Lock()
        self._files = ProcFiles()  # descriptors kept for the tree's io files
        # (parent pid, start ticks) per pid, read from /proc/PID/stat when its io file was
        # opened: while that descriptor still reads, it is the same process
        self._ident: dict[int, tuple[int, int]] = {}
        # the pids of the tree at the last reading, the watched one first (core.processes.waits
        # looks
        # at its workers among them)
        self.members: tuple[int, ...] = ()
        # the start of the running cell (a kernel's tracker sets it; None between cells):
        # sample.process.running_since, else the process's own start
        self.busy_since: Callable[[], float | None] | None = None

    def _read_tree(self, sample: Sample) -> dict[Key, _Seen] | None:
        """Counters of the watched process and its descendants, read straight from /proc
        (psutil objects cost more than the two small files we need per process)."""
        ourselves = self.pid == os.getpid()
        pids = [self.pid]
        if self.children:
            # the guard's helpers are ours, not the job's: not even walked into
            skip = helper_pids() if ourselves else ()
            quiet = _our_thread_ids() if ourselves else ()
            # children files are opened per read (one per thread would be many to keep),
            # but the watched process's main thread's, read every tick
            pids.extend(_descendants(self.pid, read_once, skip, quiet, self._files.read))
        keys: dict[int, Key] = {}
        raw: list[tuple[Key, Counts, int]] = []
        ident_now: dict[int, tuple[int, int]] = {}
        for pid in pids:
            if pid == self.pid and ourselves:
                # right before the process counters, so both cover the same interval
                self._self_now = _own_counts(self._files.read)
            try:
                data, opened = self._files.read_fresh(f"{hostfs.procfs()}/{pid}/io")
                counts = _parse_io(data)
                ident = self._ident.get(pid)
                if opened or ident is None:  # a kept descriptor is still the same process
                    ident = _stat_fields(pid)
                ident_now[pid] = ppid, start = ident
            except (OSError, ValueError, IndexError) as exc:
                if pid != self.pid:
                    continue  # a child that just exited or is not ours to read
                sample.notes[self.name] = (
                    f"process {self.pid} has exited"
                    if isinstance(exc, (FileNotFoundError, ProcessLookupError))
                    else f"cannot read the I/O counters of pid {self.pid}: "
                    f"{getattr(exc, 'strerror', None) or exc}"
                )
                return None
            key = keys[pid] = (pid, start)
            raw.append((key, counts, ppid))
        self._ident = ident_now
        self.members = tuple(keys)
        return {key: _Seen(counts, keys.get(ppid)) for key, counts, ppid in raw}

    def collect(self, sample: Sample) -> None:
        with self._lock:
            boot_now = _boot_clock()
            now = self.clock()
            cur = self._read_tree(sample)
            self._files.sweep()  # processes and threads that left: their descriptors go
            if cur is None:
                self._seen, self._credit, self._prev_t = {}, {}, None
                return
            prev, prev_t = self._seen, self._prev_t
            born_after = (self._prev_boot_clock - 0.02) * CLOCK_TICKS  # 10 ms ticks
            self._seen, self._prev_t, self._prev_boot_clock = cur, now, boot_now

            # vanished processes: what we counted for them (and what they were still owed
            # by their own reaped children) will reappear in their parent's counters
            for key, seen in prev.items():
                if key in cur:
                    continue
                owed = _add(seen.counts, self._credit.pop(key, (ZERO, 0))[0])
                if seen.parent is not None and seen.parent in cur:
                    have = self._credit.get(seen.parent, (ZERO, 0))[0]
                    self._credit[seen.parent] = (_add(have, owed), CREDIT_READINGS + 1)
            self._credit = {
                k: (c, n - 1) for k, (c, n) in self._credit.items() if k in cur and n > 1
            }

            total: Counts = ZERO
            if prev_t is not None:
                for key, seen in cur.items():
                    before = prev.get(key)
                    if before is not None:
                        delta = _sub(seen.counts, before.counts)
                    elif key[1] >= born_after:
                        delta = seen.counts  # born since the last reading: all of it is new
                    else:
                        continue  # existed before but unseen: its past is not this interval
                    credit, readings = self._credit.pop(key, (None, 0))
                    if credit is not None:
                        left = _sub(credit, delta)
                        delta = _sub(delta, credit)
                        if any(left):
                            self._credit[key] = (left, readings)
                    total = _add(total, delta)
            if self.pid == os.getpid():
                own, before = self._self_now, self._prev_self
                if own is not None and before is not None and prev_t is not None:
                    for tid, counts in own.items():  # a thread new since: all of it
                        total = _sub(total, _sub(counts, before.get(tid, ZERO)))
                self._prev_self = own
            dt = (now - prev_t) if prev_t is not None else 0.0
            rates = [x / dt if dt > 0 else 0.0 for x in total]
            sample.process = ProcessIO(
                pid=self.pid,
                pids=len(cur),
                read_chars_s=rates[0],
                write_chars_s=rates[1],
                read_bytes_s=rates[2],
                write_bytes_s=rates[3],
            )
            self._running(sample, boot_now)

    def _running(self, sample: Sample, boot_now: float) -> None:
        """``running_since``: the cell's start while a kernel runs one, else the process's
        (its start ticks against the boot clock, not btime: a wall-clock step moves btime)."""
        assert sample.process is not None
        cell = self.busy_since() if self.busy_since is not None else None
        ident = self._ident.get(self.pid)
        if cell is not None:
            sample.process.running_since, sample.process.running_what = cell, "cell"
        elif ident is not None:
            age = max(0.0, boot_now - ident[1] / CLOCK_TICKS)
            sample.process.running_since = sample.t - age

    def close(self) -> None:
        """Close the kept /proc descriptors (the sampler calls this when it closes)."""
        self._files.close()
