"""How long a small write + fsync takes in a directory: an ioping-style, bounded probe.

Logging a scalar every step is exactly this operation, so its latency is what a training loop
pays on that filesystem. ``probe_directory`` runs inside the guard's helper process (never in
the caller: the write may hang on a dead mount); ``local_baseline`` measures the same on local
block storage so a slow mount can be compared to something real.

The temporary file is hidden, named ``.trainwatch-probe-<host>-<pid>-<random>.tmp`` and
always removed, also on KeyboardInterrupt/SIGTERM (the worker turns SIGTERM into an
exception). A helper killed with SIGKILL cannot clean up: ``clean_leftovers`` recognises its
file by name and removes it the next time (the worker calls it before every probe). The host
is in the name because agents on many nodes probe the same shared directory: a pid says
whether a probe still runs only on the host that started it, so node A must never delete
node B's file mid-probe.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import stat
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..defaults import DEFAULTS, Defaults
from ..identity import pid_alive
from ..model import ProbeResult

if TYPE_CHECKING:  # the worker imports this module: keep its start-up free of the guard
    from ..guard.guard import MountGuard

PREFIX = ".trainwatch-probe-"
# host (absent in names from before hosts were named), pid, random token; the host is
# greedy, so a hostname that ends in digits ("node-7") still parses
LEFTOVER = re.compile(
    r"\.trainwatch-probe-(?:(?P<host>.+)-)?(?P<pid>\d+)-(?P<token>[0-9a-f]+)\.tmp"
)
STALE_AFTER_S = 3600.0  # a probe file this old is a leftover whatever its pid says
READ_ONLY = "read-only filesystem"
HOST_MAX = 64  # of the name's 255 bytes


def host_tag(host: str | None = None) -> str:
    """This machine's name as it goes into a file name: only ``[A-Za-z0-9_.-]``, at most
    ``HOST_MAX`` characters (a hostname may hold anything a file name should not)."""
    name = socket.gethostname() if host is None else host
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:HOST_MAX]
    return tag or "unknown"


def probe_name(host: str | None = None) -> str:
    return f"{PREFIX}{host_tag(host)}-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile (what ioping and fio report for small sample counts)."""
    rank = max(1, min(len(sorted_ms), round(q / 100.0 * len(sorted_ms) + 0.5)))
    return sorted_ms[rank - 1]


def probe_refusal(directory: str) -> str | None:
    """Why nothing may be written in ``directory``, or None. A device node, a FIFO or a
    socket is no directory; a kernel pseudo-filesystem (devtmpfs, proc, sysfs, cgroup...)
    is no storage: a file created in /dev, /proc or /sys is a kernel object or a change to
    the kernel, and its latency says nothing about any disk. The filesystem is found by the
    directory's device number in the mount table: statvfs cannot tell devtmpfs from tmpfs."""
    from .mounts import fstype_of_dev, is_pseudo, read_mounts

    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        return f"not probed: {directory} is not a directory"
    try:
        fstype = fstype_of_dev(st.st_dev, read_mounts())
    except OSError:  # no mount table: the directory's own checks still apply
        fstype = None
    if is_pseudo(fstype):
        return f"not probed: {directory} is on {fstype}, a kernel pseudo-filesystem"
    return None


def foreign_owner(directory: str) -> str | None:
    """Why ``directory`` is not ours to write in (it belongs to another user), or None.
    As root the server could write anywhere; it writes only where it was asked or into its
    own user's directories (issue 24)."""
    uid = os.stat(directory).st_uid
    if uid == os.geteuid():
        return None
    return f"not probed: {directory} belongs to another user (uid {uid}); read-only facts only"


def probe_directory(
    directory: str,
    writes: int = DEFAULTS.probe_writes,
    block_bytes: int = DEFAULTS.probe_block_bytes,
    budget_s: float = DEFAULTS.probe_budget_s,
    *,
    interval_s: float = 0.0,
    on_write: Callable[[int], None] | None = None,
) -> ProbeResult:
    """``writes`` writes of ``block_bytes`` + fsync each to a hidden temp file; stops early
    once ``budget_s`` is spent. ``interval_s`` pauses between writes (ioping -i);
    ``on_write(i)`` is called after each timed write (tests use it to interrupt).
    Refuses (an error, nothing written) anywhere but a directory on storage: see
    ``probe_refusal``."""
    why = probe_refusal(directory)
    if why is not None:
        return ProbeResult(None, None, 0, error=why)
    st = os.statvfs(directory)
    if st.f_flag & os.ST_RDONLY:
        return ProbeResult(None, None, 0, error=READ_ONLY)
    path = os.path.join(directory, probe_name())
    block = os.urandom(block_bytes)  # incompressible, so compressing filesystems still write
    times_ms: list[float] = []
    start = time.monotonic()
    fd = -1
    attempted = False
    try:
        try:
            attempted = True
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            if exc.errno == errno.EROFS:
                return ProbeResult(None, None, 0, error=READ_ONLY)
            raise
        _timed_writes(fd, block, writes, start + budget_s, interval_s, on_write, times_ms)
    except OSError as exc:
        if not times_ms:
            return ProbeResult(None, None, 0, error=f"{exc.strerror or exc} ({directory})")
    finally:
        if fd >= 0:
            os.close(fd)
        if attempted:
            # also when an interrupt landed between open() and the assignment of fd: the
            # name (pid + random) is ours alone, so this never removes anybody else's file
            with contextlib.suppress(OSError):
                os.unlink(path)
    ordered = sorted(times_ms)
    return ProbeResult(
        p50_ms=round(statistics.median(ordered), 3),
        p99_ms=round(_percentile(ordered, 99), 3),
        samples=len(ordered),
    )


def _timed_writes(
    fd: int,
    block: bytes,
    writes: int,
    deadline: float,
    interval_s: float,
    on_write: Callable[[int], None] | None,
    times_ms: list[float],
) -> None:
    """Up to ``writes`` pwrite + fsync of ``block`` to ``fd``, each one's milliseconds appended
    to ``times_ms`` as it ends (so an error part-way keeps what was measured); stops once
    ``time.monotonic()`` reaches ``deadline``."""
    for i in range(writes):
        t0 = time.perf_counter()
        os.pwrite(fd, block, i * len(block))
        os.fsync(fd)
        times_ms.append((time.perf_counter() - t0) * 1000.0)
        if on_write is not None:
            on_write(i)
        if time.monotonic() >= deadline:
            break
        if interval_s > 0:
            time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


def _is_leftover(m: re.Match[str], stale: bool, host: str) -> bool:
    """Stale whoever wrote it; else only a file of this host whose process is gone (another
    host's pid means nothing here, and a name without a host may come from any of them)."""
    pid = int(m.group("pid"))
    if m.group("host") is None or m.group("host") != host:
        return stale
    return pid != os.getpid() and (stale or not pid_alive(pid))


def clean_leftovers(directory: str, host: str | None = None) -> int:
    """Remove probe files left by helpers that no longer run; returns how many.

    Only this host's files are judged by their pid (``host``: this machine by default);
    another host's file goes only once it is older than ``STALE_AFTER_S``."""
    removed = 0
    now = time.time()
    me = host_tag(host)
    with os.scandir(directory) as it:
        for entry in it:
            m = LEFTOVER.fullmatch(entry.name)
            if not m:
                continue
            try:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > STALE_AFTER_S
            except FileNotFoundError:
                continue
            if _is_leftover(m, stale, me):
                try:
                    os.unlink(entry.path)
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


# -- local baseline -------------------------------------------------------------------------

_baseline_lock = threading.Lock()
_baseline: tuple[float, ProbeResult | None] | None = None
FAILED_RETRY_S = 60.0


def baseline_candidates() -> list[str]:
    """Where local block storage may be: $HOME, the working directory, /var/tmp, the temp
    directory. No ``tempfile.gettempdir()`` call here: on its first use it writes test files
    to find a usable directory, which may hang on a dead mount; we take the same answer from
    its cache or from $TMPDIR."""
    dirs = [os.path.expanduser("~")]
    with contextlib.suppress(OSError):
        dirs.append(os.getcwd())
    dirs.append("/var/tmp")
    dirs.append(tempfile.tempdir or os.environ.get("TMPDIR") or "/tmp")
    return dirs


def local_baseline(
    defaults: Defaults = DEFAULTS, guard: MountGuard | None = None, *, refresh: bool = False
) -> ProbeResult | None:
    """Probe latency on local block storage, measured through the guard and cached for
    ``defaults.baseline_ttl_s`` (a failure is retried after a minute). ``None`` when no
    candidate directory is on a local disk or the probe failed."""
    global _baseline
    with _baseline_lock:
        now = time.monotonic()
        if not refresh and _baseline is not None:
            at, value = _baseline
            ttl = defaults.baseline_ttl_s if value is not None else FAILED_RETRY_S
            if now - at < ttl:
                return value
        value = _measure_baseline(defaults, guard)
        _baseline = (time.monotonic(), value)
        return value


def probe_through(
    guard: MountGuard,
    mountpoint: str,
    directory: str,
    defaults: Defaults = DEFAULTS,
    *,
    owned_only: bool = False,
) -> ProbeResult:
    """The probe as every caller runs it: by the mount's helper process, in the probe lane (a
    2 s probe never delays the per-tick statvfs), within the budget plus the mount timeout.
    Raises what ``MountGuard.call`` raises."""
    from ..guard.guard import PROBE_LANE

    raw = guard.call(
        mountpoint,
        "probe",
        lane=PROBE_LANE,
        timeout=defaults.probe_budget_s + defaults.mount_timeout_s,
        directory=directory,
        writes=defaults.probe_writes,
        block_bytes=defaults.probe_block_bytes,
        budget_s=defaults.probe_budget_s,
        owned_only=owned_only,
    )
    return ProbeResult(**raw)


def looks_slow(probe: ProbeResult | None, defaults: Defaults = DEFAULTS) -> bool:
    """Over the least latency any slow-mount verdict needs: worth a second look."""
    return (
        probe is not None
        and probe.p50_ms is not None
        and (probe.p50_ms >= min(defaults.slow_ratio_min_ms, defaults.slow_p50_ms))
    )


def probe_with_evidence(
    guard: MountGuard,
    mountpoint: str,
    directory: str,
    defaults: Defaults = DEFAULTS,
    *,
    owned_only: bool = False,
) -> ProbeResult:
    """``probe_through``, plus what a slow-mount verdict needs besides one number.

    A probe that looks slow may have landed in somebody else's burst of fsyncs, which slows
    every disk of the machine alike: it is repeated at once while the local reference is
    measured again, on its own storage, at the same moment. The answer is the second probe,
    with ``slow_runs`` (how many of the two looked slow, counted from the newest) and that
    ``reference``; the rule (advice.storage.slow_mount) compares the two.
    """
    first = probe_through(guard, mountpoint, directory, defaults, owned_only=owned_only)
    if not looks_slow(first, defaults):
        return first
    box: list[ProbeResult | None] = []

    def measure_reference() -> None:
        try:
            box.append(local_baseline(defaults, guard, refresh=True))
        except Exception:  # no reference is a weaker verdict, never a crash
            box.append(None)

    thread = threading.Thread(target=measure_reference, name="trainwatch-reference", daemon=True)
    thread.start()
    again = probe_through(guard, mountpoint, directory, defaults, owned_only=owned_only)
    thread.join(defaults.probe_budget_s + defaults.mount_timeout_s)
    runs = 2 if looks_slow(again, defaults) else 0
    again.slow_runs, again.reference = runs, box[0] if box else None
    return again


def _measure_baseline(defaults: Defaults, guard: MountGuard | None) -> ProbeResult | None:
    from ..guard.guard import MountUnresponsive, WorkerUnavailable, default_guard
    from .blockdev import block_device_for, physical_disks
    from .mounts import classify, mount_for_path, read_mounts

    g = guard if guard is not None else default_guard()
    try:
        mounts = read_mounts()
    except OSError:
        return None
    for directory in baseline_candidates():
        try:
            entry = mount_for_path(directory, mounts)
        except LookupError:
            continue
        if classify(entry) != "local" or entry.read_only:
            continue
        try:
            result = probe_through(g, entry.mountpoint, os.path.abspath(directory), defaults)
        except (MountUnresponsive, WorkerUnavailable, OSError, RuntimeError):
            continue
        if result.error is None and result.samples:
            result.where = os.path.abspath(directory)
            result.device = block_device_for(entry, mounts=mounts)
            result.disks = list(physical_disks(result.device, mounts))
            return result
    return None
