"""Mirror: ``local_mirror`` against ``rsync -a`` run every ``every`` seconds, same workload.

A logger process appends one 256-byte event per 10 ms to an event file for a minute, beside
20 files of 64 KiB that do not change (configs, older runs). Once the mirror copies the
directory to a share every ``every`` seconds (one final sync at the end), once ``rsync -a``
does, started every ``every`` seconds (and once at the end). Reported for each: CPU seconds
(the mirror: its thread and its guard helper processes; rsync: every rsync process) and the
bytes copied (the mirror's count; rsync's "Total transferred file size"). The share is a
real sshfs mount when this machine can make one (root, sshd, sshfs), else a local
directory. Not counted for either: the sshfs daemon's own CPU.

A second scenario (issue 34 item 12), ``--big``: one 4.5 GiB sparse log (1 MiB of data
at its head, the rest a hole) mirrored every 5 s while 1 KiB is appended every 5 s: the CPU
of the first copy, the CPU per minute while appending (the mirror thread and its helpers),
the CPU of a restart until its first round ends, and the blocks the copy takes on the share.

Run: ``python -m tests.benchmarks.bench_mirror [--quick] [--every 5,30] [--big]``;
``run(cfg)`` gives the rows for ``run.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from tests.benchmarks.common import REPO, Config, Row, fmt_bytes, guarded, skipped

GROUP = "8 mirror"
EVENT_BYTES = 256
EVENT_EVERY_S = 0.01
STATIC_FILES, STATIC_BYTES = 20, 64 * 1024
LOGGER = textwrap.dedent(
    """
    import sys, time
    path, seconds, size, every = sys.argv[1], *map(float, sys.argv[2:5])
    size = int(size)
    record = b"e" * (size - 1) + b"\\n"
    start = time.monotonic()
    n = 0
    with open(path, "ab") as fh:
        while time.monotonic() - start < seconds:
            fh.write(record)
            fh.flush()
            n += 1
            time.sleep(max(0.0, start + n * every - time.monotonic()))
    print(n)
    """
)


class _Factory:
    """Just enough of pytest's tmp_path_factory for tests.support.mounts._sshfs."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.base))


@contextlib.contextmanager
def share_dir(base: Path) -> Iterator[tuple[Path, str, Path]]:
    """A directory on a real sshfs share when possible, else a local one; which it is; and
    the same directory on the server's side (sshfs makes up the blocks a file takes)."""
    try:
        from tests.support.mounts import _sshfs

        with _sshfs(_Factory(base)) as mount:  # type: ignore[arg-type]
            yield mount.path, "sshfs", mount.remote / mount.path.relative_to(mount.mountpoint)
            return
    except BaseException as exc:  # pytest's skip too: no root, no sshd
        if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
            raise
        sys.stderr.write(f"bench_mirror: no sshfs share ({exc}); copying to a local directory\n")
    local = base / "share"
    local.mkdir()
    yield local, "local directory", local


def prepare(local: Path) -> Path:
    local.mkdir(parents=True)
    for i in range(STATIC_FILES):
        (local / f"static-{i:02d}.json").write_bytes(os.urandom(STATIC_BYTES))
    return local / "events.out.tfevents.bench"


def start_logger(events: Path, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            LOGGER,
            str(events),
            str(seconds),
            str(EVENT_BYTES),
            str(EVENT_EVERY_S),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def helpers_cpu() -> float:
    """CPU of our mount-guard helper processes (not the sshd serving the share)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "trainwatch_lab.core.worker.main" in " ".join(child.cmdline()):
                t = child.cpu_times()
                total += t.user + t.system
    return total


def run_mirror(local: Path, share: Path, seconds: float, every: float) -> dict[str, Any]:
    from trainwatch_lab.fix.mirror.mirror import Mirror

    events = prepare(local)
    logger = start_logger(events, seconds)
    before_self, before_helpers = time.process_time(), helpers_cpu()
    mirror = Mirror(local, share, every=every, exit_timeout=60)
    logger.wait()
    done = mirror.close(60)
    cpu = time.process_time() - before_self + helpers_cpu() - before_helpers
    return {
        "cpu_s": cpu,
        "bytes": mirror.status().bytes_copied,
        "in_sync": done,
        "events": int(logger.stdout.read() if logger.stdout else 0),
        "final_bytes": sum(p.stat().st_size for p in local.iterdir() if p.is_file()),
    }


TRANSFERRED = re.compile(r"Total transferred file size: ([\d,.]+) bytes")


def _rsync(src: Path, dst: Path) -> int:
    out = subprocess.run(
        ["rsync", "-a", "--stats", f"{src}/", f"{dst}/"], capture_output=True, text=True, check=True
    )
    m = TRANSFERRED.search(out.stdout)
    return int(m.group(1).replace(",", "").replace(".", "")) if m else 0


def run_rsync(local: Path, share: Path, seconds: float, every: float) -> dict[str, Any]:
    events = prepare(local)
    share.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    logger = start_logger(events, seconds)
    copied, runs = 0, 0
    start = time.monotonic()
    while logger.poll() is None:
        copied += _rsync(local, share)
        runs += 1
        next_run = start + runs * every
        while logger.poll() is None and time.monotonic() < next_run:
            time.sleep(0.05)
    copied += _rsync(local, share)  # the final sync
    # only waited children count here: the rsync runs, not the logger (waited below)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    events_n = int(logger.stdout.read() if logger.stdout else 0)
    logger.wait()
    return {"cpu_s": cpu, "bytes": copied, "runs": runs + 1, "events": events_n}


def measure(cfg: Config, every: float) -> list[Row]:
    seconds = 10.0 if cfg.quick else 60.0
    if shutil.which("rsync") is None:
        return [
            skipped(GROUP, f"every {every:g} s", "rsync is not installed (apt-get install rsync)")
        ]
    with tempfile.TemporaryDirectory(prefix="twbench-mirror-") as tmp:
        base = Path(tmp)
        with share_dir(base) as (share, kind, _):
            sys.stderr.write(f"bench_mirror: every {every:g} s, {seconds:g} s, share: {kind}\n")
            mirror = run_mirror(base / "m-local", share / "mirror", seconds, every)
            rsync = run_rsync(base / "r-local", share / "rsync", seconds, every)
    note = (
        f"{mirror['events']} events of {EVENT_BYTES} B in {seconds:g} s + {STATIC_FILES} static "
        f"files of {fmt_bytes(STATIC_BYTES)}; share: {kind}; the local data: "
        f"{fmt_bytes(mirror['final_bytes'])}"
    )
    label = f"every {every:g} s"
    return [
        Row(GROUP, f"mirror CPU, {label}", f"{mirror['cpu_s']:.2f} s", note=note, data=mirror),
        Row(
            GROUP,
            f"rsync -a CPU, {label}",
            f"{rsync['cpu_s']:.2f} s",
            note=f"{rsync['runs']} runs",
            data=rsync,
        ),
        Row(GROUP, f"mirror bytes copied, {label}", fmt_bytes(mirror["bytes"]), data=mirror),
        Row(GROUP, f"rsync -a bytes copied, {label}", fmt_bytes(rsync["bytes"]), data=rsync),
    ]


BIG_BYTES = 4608 * 1024 * 1024  # 4.5 GiB
BIG_HEAD = 1024 * 1024
BIG_APPEND, BIG_EVERY_S = 1024, 5.0


def _cpu() -> float:
    """This process (the mirror's thread) and its guard helpers."""
    return time.process_time() + helpers_cpu()


def run_big(local: Path, share: Path, server: Path, seconds: float) -> dict[str, Any]:
    """The big sparse log: first copy, appends for ``seconds``, a restart (see the doc)."""
    from trainwatch_lab.fix.mirror.mirror import Mirror

    local.mkdir(parents=True)
    log = local / "events.out.tfevents.big"
    with open(log, "wb") as fh:
        fh.write(os.urandom(BIG_HEAD))
        fh.truncate(BIG_BYTES)
    out: dict[str, Any] = {}
    cpu, t0 = _cpu(), time.monotonic()
    mirror = Mirror(local, share, every=BIG_EVERY_S, exit_timeout=600)
    out["first_in_sync"] = mirror.sync(3600)
    out["first_cpu_s"], out["first_s"] = _cpu() - cpu, time.monotonic() - t0
    copy = server / share.name / log.name
    out["share_blocks_bytes"] = os.stat(copy).st_blocks * 512 if copy.exists() else None
    cpu, start, n = _cpu(), time.monotonic(), 0
    while time.monotonic() - start < seconds:
        with open(log, "ab") as fh:
            fh.write(os.urandom(BIG_APPEND))
        n += 1
        time.sleep(max(0.0, start + n * BIG_EVERY_S - time.monotonic()))
    elapsed = time.monotonic() - start
    out["append_cpu_per_min_s"] = (_cpu() - cpu) * 60.0 / elapsed
    out["appends"] = n
    out["closed_in_sync"] = mirror.close(600)
    cpu, t0 = _cpu(), time.monotonic()
    again = Mirror(local, share, every=BIG_EVERY_S, exit_timeout=600)
    out["restart_in_sync"] = again.sync(3600)
    out["restart_cpu_s"], out["restart_s"] = _cpu() - cpu, time.monotonic() - t0
    out["restart_bytes_copied"] = again.status().bytes_copied
    again.close(600)
    return out


def measure_big(cfg: Config) -> list[Row]:
    seconds = 20.0 if cfg.quick else 60.0
    with tempfile.TemporaryDirectory(prefix="twbench-mirror-big-") as tmp:
        base = Path(tmp)
        with share_dir(base) as (share, kind, server):
            sys.stderr.write(f"bench_mirror: big sparse log, {seconds:g} s, share: {kind}\n")
            big = run_big(base / "local", share / "big", server, seconds)
    group, what = f"{GROUP} (big sparse log)", "4.5 GiB sparse log"
    note = (
        f"{fmt_bytes(BIG_BYTES)} sparse ({fmt_bytes(BIG_HEAD)} of data), {BIG_APPEND} B appended "
        f"every {BIG_EVERY_S:g} s for {seconds:g} s, mirror every {BIG_EVERY_S:g} s; share: {kind}"
    )
    blocks = big["share_blocks_bytes"]
    return [
        Row(group, f"{what}: CPU per minute while appending",
            f"{big['append_cpu_per_min_s']:.2f} s", note=note, data=big),
        Row(group, f"{what}: first copy CPU", f"{big['first_cpu_s']:.1f} s",
            note=f"{big['first_s']:.1f} s wall", data=big),
        Row(group, f"{what}: restart CPU until in sync", f"{big['restart_cpu_s']:.2f} s",
            note=f"{big['restart_s']:.1f} s wall, "
            f"{fmt_bytes(big['restart_bytes_copied'])} copied again", data=big),
        Row(group, f"{what}: blocks on the share",
            fmt_bytes(blocks) if blocks is not None else "?", data=big),
    ]  # fmt: skip


def run(cfg: Config, everies: tuple[float, ...] = (5.0,), big: bool = True) -> list[Row]:
    rows: list[Row] = []
    for every in everies:
        rows += guarded(GROUP, f"every {every:g} s", lambda e=every: measure(cfg, e))
    if big:
        rows += guarded(GROUP, "big sparse log", lambda: measure_big(cfg))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 s instead of 60 s")
    parser.add_argument("--every", default="5", help="comma-separated seconds (default: 5)")
    parser.add_argument("--big", action="store_true", help="only the big sparse log")
    args = parser.parse_args()
    everies = () if args.big else tuple(float(x) for x in args.every.split(","))
    rows = run(Config.make(args.quick), everies)
    print("| metric | value | note |\n|---|---|---|")
    for row in rows:
        print(f"| {row.metric} | {row.value} | {row.note} |")
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
