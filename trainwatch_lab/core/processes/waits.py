"""Time lost to storage: the share of the training loop's time spent waiting on each path.

Why: "your loop spends 23 % of its time waiting on /mnt/share/runs (fsync)" comes long before
a GPU sits idle for 30 s, and no profiler names the path without a hand-taken trace.

Two measurements, combined every tick:

1. How long the main thread slept, exactly: /proc/PID/task/TID/schedstat counts its time on a
   CPU and its time waiting for one (ns, CONFIG_SCHED_INFO); the rest of the wall time it was
   asleep. No sampling error there, so a CPU-only loop reads 0.
2. What it slept on, sampled: a thread of ours (``WaitSampler``) reads
   /proc/PID/task/TID/syscall ``wait_rate_hz`` (10) times a second, at a random moment in
   each slot (stratified sampling: a loop whose period matches ours cannot alias); once a
   second while there is nothing to tell apart (``wait_quiet_rate_hz``). The kernel answers
   "running", or the call and its arguments: an fd resolves through the /proc/PID/fd link, a
   path argument (openat, statx, rename) through /proc/PID/mem. Workers of the same
   executable (DataLoader workers) are looked at in turn, one per observation.

A path's fraction is the sleep time times the share of sleeping observations that were on a
file under it; observations pool over ticks until there are ``wait_pool_min`` of them, so a
5 % duty cycle (a sleeping look every 2 s) still gets its split, but never past a tick that
saw none of what this one sees (the loop sleeps on something else now). Only procfs is read,
never the files themselves: a dead mount cannot block the measurement. Reading another user's
syscall file needs ptrace rights (root, or the same user where Yama allows it).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import hostfs
from ..defaults import DEFAULTS, Defaults
from ..model import Sample
from ..procfile import ProcFiles, read_once
from .waitlook import Eyes, Key


def owner(file: str, watched: Sequence[str]) -> str | None:
    """The watched path ``file`` lies under (the deepest, when they nest), or None."""
    best: str | None = None
    for path in watched:
        inside = file == path or file.startswith(path if path.endswith("/") else path + "/")
        if inside and (best is None or len(path) > len(best)):
            best = path
    return best


@dataclass(slots=True)
class Taken:
    """Observations since the last ``take``: counts of what sleeping threads were in."""

    main: Counter[Key] = field(default_factory=Counter)
    main_n: int = 0  # every observation of the main thread, running ones included
    workers: Counter[Key] = field(default_factory=Counter)
    workers_n: int = 0
    error: str | None = None  # why the main thread cannot be looked at


# sleep below this without a look to split it is reported as none (a CPU-bound loop)
UNSPLIT = 0.005


class WaitSampler:
    """Looks where ``pid``'s main thread (and, in turn, one worker) is, once per ``period``
    on its own thread; ``take`` hands over the counts. The thread stops by itself when
    nobody took for ``idle_stop_s`` (a stopped Sampler must not keep it looking)."""

    def __init__(
        self, pid: int, rate_hz: float, idle_stop_s: float, rng: random.Random | None = None
    ) -> None:
        self.pid = pid
        self.period = 1.0 / rate_hz  # the source changes it (the quiet rate)
        self.idle_stop_s = idle_stop_s
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._taken = Taken()
        self._workers: list[int] = []
        self._turn = 0
        self._asked = time.monotonic()
        self._running: object | None = None  # the running thread's token: None stops it
        self._thread: threading.Thread | None = None
        self._eyes = Eyes(pid)  # for ``look`` from outside the thread

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            self._asked = time.monotonic()
            if self._running is not None:
                return
            token = self._running = object()
            self._thread = threading.Thread(
                target=self._run, args=(token,), name="trainwatch-waits", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """The thread ends at its next wake (within a period), closing what it opened."""
        with self._lock:
            self._running = self._thread = None
        self._eyes.close()

    def set_workers(self, pids: Sequence[int]) -> None:
        self._workers = list(pids)  # replaced whole: the thread reads one list or the other

    def take(self) -> Taken:
        with self._lock:
            taken, self._taken = self._taken, Taken(error=self._taken.error)
            self._asked = time.monotonic()
        return taken

    def _run(self, token: object) -> None:
        """A look at a random moment of each period (stratified: no aliasing with a loop of
        the same period). time.sleep rather than a timed lock: each wake is most of the
        cost, and a plain sleep wakes cheaper; stopping waits for the wake instead."""
        eyes = Eyes(self.pid)
        slot = time.monotonic()
        try:
            while True:
                period = self.period
                time.sleep(max(0.0, slot + self._rng.random() * period - time.monotonic()))
                if self._running is not token:
                    return
                self.observe(eyes)
                slot += period
                now = time.monotonic()
                if slot + period < now:  # fell behind (a busy machine): skip, don't burst
                    slot = now
                if now - self._asked > self.idle_stop_s:
                    with self._lock:
                        if self._running is token:
                            self._running = self._thread = None
                    return
        finally:
            eyes.close()

    # -- one observation ----------------------------------------------------------------
    def observe(self, eyes: Eyes | None = None) -> None:
        """Look at the main thread and at the next worker, and count what they were in.
        Why so lean: at 10 looks a second on a cold CPU cache, every line here costs."""
        eyes = eyes or self._eyes
        try:
            data = eyes.syscall.read()
            main = None if data[:1] == b"r" else eyes.look(self.pid, data)  # r: "running"
            error = None
        except OSError as exc:
            main, error = None, self._why(exc)
        workers, worker, pid = self._workers, None, None
        if workers:
            self._turn = (self._turn + 1) % len(workers)
            pid = workers[self._turn]
            with contextlib.suppress(OSError):  # a worker that just exited
                worker = eyes.look(pid, read_once(f"{hostfs.procfs()}/{pid}/task/{pid}/syscall"))
        with self._lock:
            taken = self._taken
            taken.error = error
            if error is None:
                taken.main_n += 1
                if main is not None:
                    taken.main[main] += 1
            if pid is not None:
                taken.workers_n += 1
                if worker is not None:
                    taken.workers[worker] += 1

    def _why(self, exc: OSError) -> str:
        if isinstance(exc, FileNotFoundError | ProcessLookupError):
            return f"process {self.pid} has exited"
        return (
            f"cannot read {hostfs.procfs()}/{self.pid}/task/{self.pid}/syscall "
            f"({exc.strerror or exc}): time lost to storage is not measured; run as root or as "
            "the process's user where ptrace is allowed (kernel.yama.ptrace_scope)"
        )

    def look(self, pid: int, text: bytes) -> Key | None:
        """What a thread whose syscall file reads ``text`` sleeps on; None while it runs."""
        return self._eyes.look(pid, text)


@dataclass(slots=True)
class _Tick:
    t: float
    main: Counter[Key]
    workers: Counter[Key]


@dataclass(slots=True)
class Split:
    """One side's (main thread or workers') time lost to storage over the last interval."""

    waits: dict[str, float] = field(default_factory=dict)
    calls: dict[str, dict[str, float]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    elsewhere: float = 0.0
    other: float = 0.0  # asleep on no file: a pipe or queue (its workers), a lock, the GPU


def split(sleep: float, shares: dict[Key, float], watched: Sequence[str]) -> Split:
    """``sleep`` (a fraction of the interval) divided among the watched paths by the shares
    of sleeping observations on files under each; the rest stays unnamed."""
    out = Split(waits={p: 0.0 for p in watched})
    by_file: dict[str, Counter[str]] = {}
    for (file, call), share in sorted(shares.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        part = sleep * share
        if file is None:
            out.other += part
            continue
        path = owner(file, watched)
        if path is None:
            out.elsewhere += part
            continue
        out.waits[path] += part
        calls = out.calls.setdefault(path, {})
        calls[call] = calls.get(call, 0.0) + part
        by_file.setdefault(path, Counter())[file] += share
    out.files = {p: c.most_common(1)[0][0] for p, c in by_file.items()}
    return out


class WaitSource:
    """Fills ``sample.process.waits`` and the fields beside it (see ProcessIO) for the
    process ``pid`` watched by the process source, which must run first, as must the paths
    source (the watched paths are its keys). ``members`` gives the process tree's pids (the
    process source's); by default the main thread's own children."""

    name = "waits"

    def __init__(
        self,
        pid: int | None = None,
        defaults: Defaults = DEFAULTS,
        members: Callable[[], Sequence[int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.defaults = defaults
        self.members = members or self._children
        self.clock = clock
        self.sampler = WaitSampler(self.pid, defaults.wait_rate_hz, defaults.wait_idle_stop_s)
        self._pool: deque[_Tick] = deque()
        self._sched: dict[int, tuple[float, int]] = {}  # pid -> (clock, on-CPU + runnable ns)
        self._files = ProcFiles(limit=defaults.wait_max_workers + 1)
        self._exe: dict[int, bool] = {}  # pid -> runs the watched process's executable
        self._last: float | None = None
        self._recent: deque[tuple[float, float, dict[str, float]]] = deque()  # t, dt, waits
        self._quiet: set[Key] | None = None  # at the quiet rate: the idle key (or none)

    def _children(self) -> Sequence[int]:
        try:
            return [
                int(p)
                for p in read_once(f"{hostfs.procfs()}/{self.pid}/task/{self.pid}/children").split()
            ]
        except (OSError, ValueError):
            return []

    def _workers(self) -> list[int]:
        """Descendants running the watched process's executable: DataLoader workers and
        multiprocessing pools (forked or spawned), not tools it started."""
        pids = [p for p in self.members() if p != self.pid]
        self._exe = {p: same for p, same in self._exe.items() if p in pids}
        try:
            mine = os.readlink(f"{hostfs.procfs()}/{self.pid}/exe")
        except OSError:
            return []
        for pid in pids:
            if pid not in self._exe:
                with contextlib.suppress(OSError):
                    self._exe[pid] = os.readlink(f"{hostfs.procfs()}/{pid}/exe") == mine
        return [p for p in pids if self._exe.get(p)][: self.defaults.wait_max_workers]

    def _sleep(self, pid: int, now: float) -> float | None:
        """Fraction of the time since the last tick that ``pid``'s main thread slept (neither
        ran nor waited for a CPU); None at its first reading or without schedstat."""
        try:
            schedstat = self._files.read(f"{hostfs.procfs()}/{pid}/task/{pid}/schedstat")
            run, delay = schedstat.split()[:2]
            busy = int(run) + int(delay)
        except (OSError, ValueError):
            self._sched.pop(pid, None)
            return None
        before, self._sched[pid] = self._sched.get(pid), (now, busy)
        if before is None or now <= before[0]:
            return None
        wall_ns = (now - before[0]) * 1e9
        return min(1.0, max(0.0, 1.0 - (busy - before[1]) / wall_ns))

    def _shares(self, side: str) -> dict[Key, float]:
        """Shares of the sleeping observations, newest ticks first until enough are pooled;
        never across a change of what the loop sleeps on: once this tick has
        ``wait_change_looks`` looks of its own, an older tick that saw none of the same
        things describes what no longer happens (a cell that ends its fsyncs and sleeps)."""
        counts: Counter[Key] = Counter()
        now: set[Key] | None = None
        for tick in reversed(self._pool):
            looks = getattr(tick, side)
            if now is None:
                now = set(looks) if looks.total() >= self.defaults.wait_change_looks else set()
            elif now and looks and not now & looks.keys():
                break
            counts.update(looks)
            if counts.total() >= self.defaults.wait_pool_min:
                break
        total = counts.total()
        return {k: v / total for k, v in counts.items()} if total else {}

    def _window(self, now: float, waits: dict[str, float]) -> dict[str, float]:
        """Each path's fraction over the last ``window_s`` (the charts' window): the mean of
        the intervals it was measured in, weighted by their length."""
        dt = now - self._recent[-1][0] if self._recent else 0.0
        self._recent.append((now, dt, waits))
        while self._recent[0][0] < now - self.defaults.window_s:
            self._recent.popleft()
        out: dict[str, float] = {}
        for path in waits:
            spans = [(d, w[path]) for _, d, w in self._recent if path in w and d > 0]
            total = sum(d for d, _ in spans)
            out[path] = sum(d * f for d, f in spans) / total if total else waits[path]
        return out

    def _pace(self, sleep: float, taken: Taken, workers: Sequence[int]) -> None:
        """Full rate while what the loop sleeps on is worth telling apart; the quiet rate
        while it hardly sleeps (CPU-bound: nothing to split) or sleeps on one thing that is
        no file (a kernel idle in its event loop between cells). Leaving quiet starts the
        pool afresh: the old observations describe what no longer happens."""
        keys = set(taken.main)
        idle = sleep > 0.98 and len(keys) == 1 and next(iter(keys))[0] is None
        if idle and self._quiet is not None and self._quiet != keys:
            idle = False  # asleep on something else now
        quiet = not workers and (sleep < 0.02 or idle)
        if self._quiet is not None and not quiet:
            self._pool = deque([self._pool[-1]])
        self._quiet = (keys if idle else set()) if quiet else None
        d = self.defaults
        self.sampler.period = 1.0 / (d.wait_quiet_rate_hz if quiet else d.wait_rate_hz)

    def collect(self, sample: Sample) -> None:
        proc = sample.process
        if proc is None or proc.pid != self.pid:
            return
        now = self.clock()
        if self._last is not None:  # the thread outlives gaps between ticks, not a stop
            gap = now - self._last
            self.sampler.idle_stop_s = max(self.defaults.wait_idle_stop_s, 3 * gap)
        self._last = now
        self.sampler.start()
        workers = self._workers()
        self.sampler.set_workers(workers)
        taken = self.sampler.take()
        if taken.error is not None:
            sample.notes[self.name] = taken.error
            return
        self._pool.append(_Tick(now, taken.main, taken.workers))
        while self._pool and self._pool[0].t < now - self.defaults.wait_pool_s:
            self._pool.popleft()
        main_sleep = self._sleep(self.pid, now)
        sleeps = [s for w in workers if (s := self._sleep(w, now)) is not None]
        self._files.sweep()
        if main_sleep is None:  # no schedstat: the sampled share of sleeping observations
            if taken.main_n == 0:
                return  # the first tick, or no look in this one: nothing to say
            main_sleep = taken.main.total() / taken.main_n
        else:  # exact; split by the pool even if a loaded machine left no look this tick
            self._pace(main_sleep, taken, workers)
        shares = self._shares("main")
        if not shares and main_sleep > UNSPLIT:
            return  # asleep, but no look caught it yet: unknown, which is not 0
        watched = sorted(sample.paths)
        main = split(main_sleep, shares, watched)
        proc.waits, proc.wait_calls, proc.wait_files = main.waits, main.calls, main.files
        proc.waits_elsewhere, proc.wait_other = main.elsewhere, main.other
        proc.wait_samples = taken.main_n
        proc.waits_window = self._window(now, main.waits)
        if sleeps and taken.workers_n:
            side = split(sum(sleeps) / len(sleeps), self._shares("workers"), watched)
            proc.worker_waits, proc.worker_wait_calls = side.waits, side.calls
            proc.wait_files = {**side.files, **main.files}
            proc.wait_workers = len(sleeps)

    def close(self) -> None:
        self.sampler.stop()
        self._files.close()
