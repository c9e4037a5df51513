"""io-bound: the training loop spends a share of its time waiting on one watched path.

core.processes.waits measures, per tick, the fraction of the interval the main thread slept in a
system
call on a file under each path (and its workers, apart); this rule averages it over
``io_bound_window_s`` so that one checkpoint save is no verdict. TensorFlow's input-pipeline
analysis calls 5 % of step time "moderately" and 20 % "highly" input-bound: the same cut-offs
give ``info`` and ``warning``. The fix follows the system call the time went to: fsync and
writes of logs, reads of data, listing and opening files, file locks.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from ..core.defaults import Defaults
from ..core.history import History
from ..core.model import Alert, PathState, ProcessIO, Sample
from ..core.paths.names import printable, short_path
from .context import Context, Detector
from .text import fmt_duration, fmt_pct

KINDS: dict[str, frozenset[str]] = {
    "sync": frozenset({"fsync", "fdatasync", "sync_file_range", "syncfs", "close"}),
    "write": frozenset(
        {"write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate"}
    ),
    "read": frozenset(
        {"read", "pread64", "readv", "preadv", "preadv2", "sendfile", "copy_file_range"}
    ),
    "lock": frozenset({"fcntl", "flock"}),
}
FIXES = {
    "sync": (
        "Each fsync waits for {path} to store the data. Log to local disk and copy to {path} "
        "in the background: `SummaryWriter(local_mirror({path!r}))` (from trainwatch_lab import "
        "local_mirror) or `trainwatch-lab mirror LOCAL_DIR {path}`; or flush less often "
        "(TensorBoard flush_secs, Lightning log_every_n_steps)."
    ),
    "write": (
        "Write logs and checkpoints to local disk and copy them to {path} in the background "
        "(`local_mirror({path!r})`, `trainwatch-lab mirror`, or save_checkpoint to a local "
        "directory); write less often or in larger pieces."
    ),
    "read": (
        "The loop waits for data from {path}: move it to a faster disk (local NVMe: copy the "
        "dataset there once before training), read it in more DataLoader workers "
        "(num_workers, prefetch_factor, persistent_workers=True), or cache it (in memory, or "
        "packed in large files read sequentially)."
    ),
    "lock": (
        "File locks on {path} wait for its server: keep lock files on local disk, or turn "
        "HDF5's file locking off (HDF5_USE_FILE_LOCKING=FALSE) for read-only data."
    ),
    "meta": (
        "Opening, listing and stat-ing files on {path} costs a round trip each: list the "
        "files once and keep the list, open each file once, and pack small files together "
        "(tar shards, WebDataset, one array file)."
    ),
}
# the same waits on a local disk: no server behind it, so no mirror to a local disk either
LOCAL_FIXES = {
    **FIXES,
    "sync": (
        "Each fsync waits for the disk under {path} to store the data: flush less often "
        "(TensorBoard `SummaryWriter(logdir, flush_secs=120, max_queue=1000)`, Lightning "
        "log_every_n_steps), let a background thread do the writing (an async logger or "
        "checkpoint writer, so the loop does not wait), or put the logs on a faster disk "
        "(local NVMe, /dev/shm for small logs)."
    ),
    "write": (
        "Write less often or in larger pieces (TensorBoard flush_secs and max_queue, "
        "Lightning log_every_n_steps, fewer checkpoints), write from a background thread "
        "(an async logger or checkpoint writer), or use a faster disk for {path}."
    ),
    "lock": (
        "File locks on {path} wait for another process holding them: give each process its "
        "own file, or turn HDF5's file locking off (HDF5_USE_FILE_LOCKING=FALSE) for "
        "read-only data."
    ),
    "meta": (
        "Opening, listing and stat-ing many files on {path} adds up: list the files once and "
        "keep the list, open each file once, and pack small files together (tar shards, "
        "WebDataset, one array file)."
    ),
}


def is_remote(p: PathState | None) -> bool:
    """Whether a path's storage sits behind a server (a share, a network block device, a
    FUSE mount) or is unknown: only there does copying to a local disk help."""
    if p is None or p.kind == "unknown":
        return True
    return p.shared or (p.fstype or "").startswith("fuse")


def kind_of(call: str) -> str:
    """Which fix a system call calls for; anything naming a path is metadata."""
    return next((kind for kind, calls in KINDS.items() if call in calls), "meta")


def window_mean(
    history: History, key: tuple[str, str, str], seconds: float, now: float
) -> tuple[float, float]:
    """(time-weighted mean, seconds covered) of a per-interval fraction over ``seconds``:
    each value counts for the time since the value before it (a gap counts 5 s at most)."""
    ts, vs = history.window(*key, seconds=seconds, now=now)
    spans = [(min(5.0, b - a), v) for (a, b), v in zip(pairwise(ts), vs[1:], strict=True)]
    covered = sum(d for d, _ in spans)
    return (sum(d * v for d, v in spans) / covered if covered > 0 else 0.0), covered


def call_shares(history: History, path: str, side: str, since: float) -> dict[str, float] | None:
    """Each system call's share of the time on ``path`` after ``since``, over the ticks
    ``side`` was measured in (None: none): a call's series has no entry where the call took
    no time, so its own mean would overstate a call that came and went."""
    ticks = len(history.series("wait", path, side, since=since)[1])
    if not ticks:
        return None
    return {
        key[2].partition(":")[2]: sum(history.series(*key, since=since)[1]) / ticks
        for key in history.keys("wait")
        if key[1] == path and key[2].startswith(f"{side}:")
    }


def top_calls(
    history: History, path: str, side: str, seconds: float, now: float
) -> list[tuple[str, float]]:
    """The system calls the time on ``path`` went to, most first, with their fractions."""
    shares = call_shares(history, path, side, now - seconds) or {}
    return sorted(shares.items(), key=lambda item: -item[1])


def lost_to_storage(sample: Sample, history: History, defaults: Defaults) -> str | None:
    """``31 % waiting on /mnt/share/runs (fsync)``: the watched path the main thread lost
    most time to over io-bound's window (the same mean this rule judges, so the headline and
    the warning never disagree), and the system call most of it went to; None without a
    watched process, a measurement in the window, or a share worth a word. The paths come
    from the history, not this tick: a tick not measured yet must not make the words blink."""
    if sample.process is None:
        return None
    window, _ = judged_window(sample.process, sample.t, defaults)
    paths = {k[1] for k in history.keys("wait") if k[2] == "main" and k[1] in sample.paths}
    means = [
        (window_mean(history, ("wait", path, "main"), window, sample.t)[0], path)
        for path in sorted(paths)
    ]
    if not means:
        return None
    fraction, path = max(means)
    if fraction < defaults.wait_shown:
        return None
    calls = top_calls(history, path, "main", window, sample.t)
    call = f" ({calls[0][0]})" if calls else ""
    return f"{fmt_pct(fraction)} waiting on {printable(short_path(path))}{call}"


def _calls_text(calls: list[tuple[str, float]], file: str | None) -> str:
    if not calls:
        return ""
    text = f", mostly in {calls[0][0]}()"
    return text + (f" of {file}" if file else "")


def _fix(path: str, calls: list[tuple[str, float]], p: PathState | None) -> str:
    """The fix for the call the time went to, on the storage the path is on."""
    kind = kind_of(calls[0][0]) if calls else "write"
    return (FIXES if is_remote(p) else LOCAL_FIXES)[kind].format(path=path)


def _verdict(fraction: float, ctx: Context) -> str | None:
    if fraction >= ctx.defaults.io_bound_high:
        return "warning"
    return "info" if fraction >= ctx.defaults.io_bound_moderate else None


def judged_window(proc: ProcessIO, now: float, defaults: Defaults) -> tuple[float, str]:
    """The seconds io-bound averages over, and how to say them: ``io_bound_window_s`` at
    most, never before the running cell (or the process) began, so the idle minutes before
    a cell do not water its 79 % down to 21 %."""
    window = defaults.io_bound_window_s
    if proc.running_since is None or now - proc.running_since >= window:
        return window, "the last {}"
    if proc.running_what == "cell":
        return max(0.0, now - proc.running_since), "the {} this cell has run"
    return max(0.0, now - proc.running_since), "the {} it has run"


def _main_alert(ctx: Context, sample: Sample, path: str) -> Alert | None:
    d, proc = ctx.defaults, sample.process
    assert proc is not None
    seconds, over = judged_window(proc, sample.t, d)
    fraction, covered = window_mean(ctx.history, ("wait", path, "main"), seconds, sample.t)
    severity = _verdict(fraction, ctx)
    if severity is None or covered < d.io_bound_min_s:
        return None
    calls = top_calls(ctx.history, path, "main", seconds, sample.t)
    how = "highly" if severity == "warning" else "moderately"
    doing = _calls_text(calls, proc.wait_files.get(path))
    return Alert(
        code="io-bound",
        severity=severity,  # type: ignore[arg-type]
        subject=path,
        message=(
            f"The training loop (pid {proc.pid}) spent {fmt_pct(fraction)} of "
            f"{over.format(fmt_duration(covered if seconds == d.io_bound_window_s else seconds))}"
            f" waiting on {path}{doing}"
            f": {how} I/O-bound ({fmt_pct(d.io_bound_moderate)} is moderately, "
            f"{fmt_pct(d.io_bound_high)} highly)."
        ),
        fix=_fix(path, calls, sample.paths.get(path)),
    )


def _worker_alert(ctx: Context, sample: Sample, path: str) -> Alert | None:
    """Workers that wait on storage most of their time, and (for a warning) a loop that
    waits on something that is not a file as long: its workers' queue, most likely."""
    d, proc = ctx.defaults, sample.process
    assert proc is not None
    key = ("wait", path, "workers")
    fraction, covered = window_mean(ctx.history, key, d.io_bound_window_s, sample.t)
    if fraction < d.io_bound_workers or covered < d.io_bound_min_s:
        return None
    other, _ = window_mean(
        ctx.history, ("proc", str(proc.pid), "wait_other"), d.io_bound_window_s, sample.t
    )
    calls = top_calls(ctx.history, path, "workers", d.io_bound_window_s, sample.t)
    starved = other >= d.io_bound_high
    loop = (
        f"; the loop itself waited {fmt_pct(other)} of the time on something other than a file "
        "(its workers' queue, most likely)"
        if starved
        else ""
    )
    return Alert(
        code="io-bound",
        severity="warning" if starved else "info",
        subject=path,
        message=(
            f"The worker processes of pid {proc.pid} ({proc.wait_workers}) spent "
            f"{fmt_pct(fraction)} of the last {fmt_duration(covered)} waiting on {path}"
            f"{_calls_text(calls, None)}{loop}."
        ),
        fix=_fix(path, calls, sample.paths.get(path)),
    )


def io_bound(ctx: Context) -> Iterator[Alert]:
    """Per watched path: the main thread's verdict, else its workers'."""
    sample = ctx.sample
    proc = sample.process
    if proc is None or not proc.waits:
        return
    for path in sorted(proc.waits):
        alert = _main_alert(ctx, sample, path)
        if alert is None and path in proc.worker_waits:
            alert = _worker_alert(ctx, sample, path)
        if alert is not None:
            yield alert


IO_BOUND_DETECTORS: list[Detector] = [io_bound]
