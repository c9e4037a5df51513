"""Shared plumbing for the benchmark rows: result rows, statistics, CPU clocks, a workload.

Every ``bench_*.py`` module exposes ``run(cfg: Config) -> list[Row]``; ``run.py`` prints them as
one markdown table. A row whose code has not landed yet says "not available yet: <why>" instead
of failing, so the table is always complete.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PEERS_VENV = Path(os.environ.get("TWBENCH_PEERS_VENV", "/tmp/twbench-peers"))


# -- configuration and results --------------------------------------------------------------
@dataclass
class Config:
    """How long each row runs. ``quick`` is for development: the same code, shorter clocks."""

    quick: bool = False
    thread_cpu_s: float = 60.0  # row 1: sampler thread CPU at 1 s
    tick_reps: int = 200  # row 1: timed ticks per source
    peers_s: float = 60.0  # row 2: peers side by side
    loop_pairs: int = 40  # row 3: on/off block pairs (x3 for the 10 Hz variant)
    loop_block_s: float = 1.0  # row 3: length of one block (whole sampler intervals)
    import_reps: int = 10  # row 4
    traffic_ticks: int = 30  # row 5
    history_samples: int = 86_400  # row 6: 24 h at 1 s
    heap_minutes: float = 10.0  # row 6: browser heap
    keep: Path | None = None  # where artifacts (JSON, screenshots) go

    @classmethod
    def make(cls, quick: bool) -> Config:
        if not quick:
            return cls()
        return cls(
            quick=True,
            thread_cpu_s=10.0,
            tick_reps=40,
            peers_s=10.0,
            loop_pairs=8,
            loop_block_s=1.0,
            import_reps=4,
            traffic_ticks=6,
            history_samples=86_400,
            heap_minutes=1.0,
        )


@dataclass
class Row:
    """One line of the table. ``status``: "ok", "MISS" (missed its target), "skip", "" (info)."""

    group: str
    metric: str
    value: str
    target: str = ""
    status: str = ""
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # raw numbers for the JSON dump


def skipped(group: str, metric: str, why: str) -> Row:
    return Row(group, metric, f"not available yet: {why}", status="skip")


def judged(ok: bool) -> str:
    return "ok" if ok else "MISS"


def need_module(name: str) -> tuple[Any, str | None]:
    """Import ``name``; on failure return (None, a one-line reason) instead of raising."""
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # the code under test may not have landed yet
        return None, f"`{name}` does not import ({type(exc).__name__}: {exc})"


def need_attr(module: str, attr: str) -> tuple[Any, str | None]:
    mod, why = need_module(module)
    if mod is None:
        return None, why
    value = getattr(mod, attr, None)
    if value is None:
        return None, f"`{module}.{attr}` is missing"
    return value, None


def guarded(group: str, metric: str, fn: Callable[[], list[Row]]) -> list[Row]:
    """Run one measurement; an exception becomes one "not available" row, never a crash."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # also pytest's skip, raised by tests.support helpers
        import traceback

        traceback.print_exc(file=sys.stderr)
        return [skipped(group, metric, f"{type(exc).__name__}: {exc}")]


# -- statistics ---------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a Student-t confidence interval (two-sided)."""
    n = len(values)
    m = statistics.fmean(values)
    if n < 2:
        return m, math.nan, math.nan
    sd = statistics.stdev(values)
    half = _t_quantile(level, n - 1) * sd / math.sqrt(n)
    return m, m - half, m + half


def trimmed_mean(values: Sequence[float], trim: float = 0.1) -> float:
    xs = sorted(values)
    k = int(len(xs) * trim)
    kept = xs[k : len(xs) - k] or xs
    return statistics.fmean(kept)


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = trimmed_mean,
    level: float = 0.95,
    resamples: int = 4000,
    seed: int = 1,
) -> tuple[float, float, float]:
    """``stat`` of the values and its percentile-bootstrap confidence interval."""
    import random

    rng = random.Random(seed)
    n = len(values)
    boots = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    alpha = (1 - level) / 2
    return stat(values), percentile(boots, 100 * alpha), percentile(boots, 100 * (1 - alpha))


def _t_quantile(level: float, dof: int) -> float:
    """Two-sided Student-t quantile by bisection on the regularised incomplete beta."""
    target = 1 - (1 - level) / 2

    def cdf(t: float) -> float:
        x = dof / (dof + t * t)
        return 1 - 0.5 * _betainc(dof / 2, 0.5, x)

    lo, hi = 0.0, 100.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if cdf(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) (continued fraction, Numerical Recipes)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(200):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-30 else 1e-30)
        c = 1 + num / c if abs(c) > 1e-30 else 1e-30
        f *= c * d
        if abs(1 - c * d) < 1e-12:
            break
    return front * (f - 1) / a


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"


def nbytes(message: str | bytes) -> int:
    """Wire size of a WebSocket message (text frames are UTF-8)."""
    return len(message.encode()) if isinstance(message, str) else len(message)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# -- CPU clocks ---------------------------------------------------------------------------
# /proc/<pid>/task/<tid>/schedstat holds on-CPU time in nanoseconds; utime/stime in .../stat
# only count 10 ms clock ticks, too coarse for a tool that uses 1 ms a second.


def thread_cpu_s(tid: int, pid: int | None = None) -> float:
    """On-CPU seconds of one thread (readable from outside the thread)."""
    with open(f"/proc/{pid or os.getpid()}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def _process_clock(pid: int) -> int:
    """clock_getcpuclockid(pid) as glibc computes it: the process-wide CPU-time clock."""
    return ((~pid) << 3) | 2  # CPUCLOCK_SCHED, process (not thread) clock


def _process_cpu_ns(pid: int) -> int | None:
    """CPU time of a whole process in ns, threads that already exited included (summing
    the schedstat of live threads would miss a thread that lived between two polls)."""
    try:
        return time.clock_gettime_ns(_process_clock(pid))
    except OSError:
        return None


def _process_tasks_ns(pid: int) -> int | None:
    """Fallback where process clocks cannot be read: the live threads' schedstat."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


class TreeCpu:
    """CPU of a process tree (every thread of the process and of its descendants, exited
    threads included), in ns precision; a child that exits keeps its last reading."""

    def __init__(self, pid: int, exclude: set[int] | None = None) -> None:
        self.pid = pid
        self.exclude = exclude or set()
        self._last: dict[int, int] = {}
        self.start = self._poll_total()

    def pids(self) -> list[int]:
        import psutil

        try:
            root = psutil.Process(self.pid)
            kids = [c.pid for c in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        return [self.pid, *(k for k in kids if k not in self.exclude)]

    def _poll_total(self) -> float:
        for pid in self.pids():
            ns = _process_cpu_ns(pid)
            if ns is None:
                ns = _process_tasks_ns(pid)
            if ns is not None:
                self._last[pid] = ns
        return sum(self._last.values()) / 1e9

    def poll(self) -> float:
        """CPU seconds used since construction (call it every second or so)."""
        return self._poll_total() - self.start


# -- processes, ports, servers --------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with_repo(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process group we started, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@dataclass
class Server:
    proc: subprocess.Popen
    url: str  # http://127.0.0.1:PORT/
    token: str
    root: Path
    log: Path

    def get_json(self, path: str, timeout: float = 10.0) -> Any:
        req = urllib.request.Request(
            self.url + path.lstrip("/"), headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())


@contextlib.contextmanager
def jupyter_server(
    python: str = sys.executable,
    *,
    app: str = "jupyter_server",
    extensions: dict[str, bool] | None = None,
    extra_args: Sequence[str] = (),
    ready_path: str = "api/status",
    timeout: float = 60.0,
) -> Iterator[Server]:
    """A real Jupyter server (``python -m jupyter_server`` or ``jupyterlab``) on a free port."""
    port = free_port()
    token = secrets.token_hex(16)
    root = Path(tempfile.mkdtemp(prefix="twbench-root-"))
    log = root.parent / f"{root.name}.log"
    args = [
        python,
        "-m",
        app,
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.open_browser=False",
        *extra_args,
    ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    for name, enabled in (extensions or {}).items():
        args.append(f"--ServerApp.jpserver_extensions={name}={enabled}")
    logf = open(log, "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        args,
        stdout=logf,
        stderr=subprocess.STDOUT,
        cwd=root,
        env=env_with_repo() if python == sys.executable else None,
        start_new_session=True,
    )
    server = Server(proc, f"http://127.0.0.1:{port}/", token, root, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter server exited: {log.read_text()[-400:]}")
            try:
                server.get_json(ready_path, timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter server not ready after {timeout:.0f} s") from None
                time.sleep(0.3)
        yield server
    finally:
        stop_process(proc)
        logf.close()
        shutil.rmtree(root, ignore_errors=True)
        log.unlink(missing_ok=True)


# -- a private data disk ------------------------------------------------------------------
@contextlib.contextmanager
def scratch_fs(size_mib: int = 512) -> Iterator[Path]:
    """A fresh loop-mounted ext4 (as root), so the loop's writes do not queue behind other
    processes' journal commits on a shared disk; a plain temp dir otherwise."""
    base = Path(tempfile.mkdtemp(prefix="twbench-fs-"))
    mnt = base / "mnt"
    mnt.mkdir()
    image = base / "disk.img"
    mounted = False
    try:
        if os.geteuid() == 0 and shutil.which("mkfs.ext4"):
            with open(image, "wb") as f:
                f.truncate(size_mib << 20)
            ok = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True)
            if ok.returncode == 0:
                r = subprocess.run(
                    ["mount", "-o", "loop", str(image), str(mnt)], capture_output=True
                )
                mounted = r.returncode == 0
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


# -- a storage workload that every watcher sees --------------------------------------------
WORKLOAD_CODE = r"""
import os, sys, time
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
data = os.path.join(d, "data.bin")
with open(data, "wb") as f:
    f.write(os.urandom(16 << 20))
chunk = os.urandom(1 << 20)
i = 0
while True:
    t0 = time.monotonic()
    with open(os.path.join(d, f"ckpt-{i % 4}.pt"), "wb") as f:
        f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    with open(data, "rb") as f:
        f.seek((i * (1 << 20)) % (16 << 20))
        f.read(1 << 20)
    with open(os.path.join(d, "train.log"), "a") as f:
        f.write(f"step {i}\n")
    i += 1
    time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
"""


@contextlib.contextmanager
def storage_workload() -> Iterator[Path]:
    """A process writing 10 MiB/s with fsync and reading a data file, for watchers to watch."""
    d = Path(tempfile.mkdtemp(prefix="twbench-work-"))
    proc = subprocess.Popen([sys.executable, "-c", WORKLOAD_CODE, str(d)], start_new_session=True)
    try:
        time.sleep(1.0)
        yield d
    finally:
        stop_process(proc)
        shutil.rmtree(d, ignore_errors=True)
