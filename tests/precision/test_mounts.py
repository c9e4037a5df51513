"""Precision of the storage rules on real filesystems, with the truth known by construction.

A local disk under a load of concurrent fsync writers (it is busy, not slow: never
slow-mount against itself), a loop-device ext4 on that busy disk, tmpfs, sshfs to a local
sshd (a share: shared-mount, not slow), the same sshfs across a link that adds 25 ms to
every request (slow-mount), its server paused (mount-unresponsive), and free space running
out fast or slowly. The timing-sensitive scenarios are repeated. Each judges every storage
code: the ones that must fire, and all the others, which must not.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from trainwatch_lab.advice.check import run_check
from trainwatch_lab.core.defaults import DEFAULTS, MIB, Defaults
from trainwatch_lab.core.model import Alert, Sample
from trainwatch_lab.monitor import make_sampler

# thresholds lowered until this machine's busy disk crosses them (a 4 KiB write + fsync
# takes ~4 ms here under the load below, ~0.3 ms when quiet): what a slower disk or a
# heavier neighbour does with the defaults
SENSITIVE = replace(DEFAULTS, slow_ratio_min_ms=1.0, slow_p50_ms=2.0, slow_reference_fast_ms=1.0)

FSYNC_WRITER = r"""
import os, sys, time
path, seconds, block = sys.argv[1], float(sys.argv[2]), os.urandom(8 << 20)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
try:
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        os.pwrite(fd, block, (i % 8) * len(block))
        os.fsync(fd)
        i += 1
finally:
    os.close(fd)
    os.unlink(path)
"""


@contextlib.contextmanager
def fsync_load(directory: Path, writers: int = 6, seconds: float = 120.0) -> Iterator[None]:
    """Other processes writing 8 MiB + fsync in a loop on the disk of ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FSYNC_WRITER, str(directory / f"w{i}"), str(seconds)]
        )
        for i in range(writers)
    ]
    try:
        time.sleep(1.0)  # let the writeback queue fill
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        for i in range(writers):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / f"w{i}")


def checked(
    path: os.PathLike[str] | str, defaults: Defaults = DEFAULTS
) -> tuple[set[str], list[Alert]]:
    report = run_check([os.fspath(path)], defaults=defaults)
    return {a.code for a in report.alerts}, report.alerts


# -- slow-mount and shared-mount ------------------------------------------------------


@pytest.mark.parametrize("defaults", [DEFAULTS, SENSITIVE], ids=["defaults", "sensitive"])
@pytest.mark.parametrize("attempt", range(3))
def test_a_busy_local_disk_is_never_slow_against_itself(judge, tmp_path, defaults, attempt) -> None:
    """Issue 10: a logdir on the local disk, probed during other processes' fsync bursts,
    was called 16x slower than that same disk measured in a quiet moment."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    with fsync_load(tmp_path / "load"):
        fired, alerts = checked(logdir, defaults)
    judge("logdir on a local disk under fsync load", fired, alerts=alerts)


@pytest.mark.parametrize("defaults", [DEFAULTS, SENSITIVE], ids=["defaults", "sensitive"])
def test_a_loop_disk_on_a_busy_disk_is_not_slow_either(
    judge, loop_ext4, tmp_path, defaults
) -> None:
    """Another device, but the reference measured at the same moment is slow too: the whole
    machine is busy, which is no reason to move the logs."""
    m = loop_ext4(64)
    with fsync_load(tmp_path / "load"):
        fired, alerts = checked(m.path, defaults)
    judge("loop ext4 on a local disk under fsync load", fired, alerts=alerts)


def test_quiet_local_filesystems(judge, tmpfs_mount, loop_ext4, tmp_path) -> None:
    for name, path in (
        ("tmpfs", tmpfs_mount("16m").path),
        ("loop ext4", loop_ext4(64).path),
        ("local disk", tmp_path),
    ):
        fired, alerts = checked(path, SENSITIVE)
        judge(f"quiet {name}", fired, alerts=alerts)


def test_sshfs_to_a_fast_server_is_shared_not_slow(judge, sshfs_mount) -> None:
    fired, alerts = checked(sshfs_mount.path)
    judge("sshfs, fast server", fired, must={"shared-mount"}, alerts=alerts)


@pytest.mark.parametrize("attempt", range(2))
def test_sshfs_across_a_slow_link_is_slow(judge, slow_sshfs_mount, attempt) -> None:
    fired, alerts = checked(slow_sshfs_mount.path)
    judge("sshfs, 25 ms link", fired, must={"shared-mount", "slow-mount"}, alerts=alerts)
    (slow,) = (a for a in alerts if a.code == "slow-mount")
    assert "in 2 probes in a row" in slow.message and "measured at the same time" in slow.message


@pytest.mark.parametrize("attempt", range(2))
def test_two_paths_on_one_slow_share_are_both_slow_never_unresponsive(
    judge, slow_sshfs_mount, attempt
) -> None:
    """Issue 34: with two paths on one share, the second waited for the first's calls on the
    share's one helper, and that wait was counted as the share not answering: `unresponsive`,
    `mount-unresponsive` and a fix that detaches the share."""
    a, b = slow_sshfs_mount.path / "a", slow_sshfs_mount.path / "b"
    a.mkdir(exist_ok=True)
    b.mkdir(exist_ok=True)
    report = run_check([str(a), str(b)])
    fired = {x.code for x in report.alerts}
    judge(
        "two paths on sshfs, 25 ms link",
        fired,
        must={"shared-mount", "slow-mount"},
        alerts=report.alerts,
    )
    assert report.verdicts == ["slow", "slow"], [s.error for s in report.states]


def test_sshfs_with_its_server_paused_is_unresponsive(judge, sshfs_mount) -> None:
    sshfs_mount.pause()
    try:
        fired, alerts = checked(sshfs_mount.path)
    finally:
        sshfs_mount.resume()
    judge("sshfs, server paused", fired, must={"mount-unresponsive"}, alerts=alerts)


# -- disk-filling on a real filesystem ------------------------------------------------


class PacedWriter(threading.Thread):
    """Writes at ``rate`` bytes/s until ENOSPC or ``limit`` bytes; records when it was full."""

    def __init__(self, path: Path, rate: float, limit: float = float("inf")) -> None:
        super().__init__(daemon=True)
        self.path, self.rate, self.limit = path, rate, limit
        self.started_at = self.full_at = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        chunk = b"\x5a" * (64 * 1024)
        written = 0
        self.started_at = time.time()
        with open(self.path, "wb", buffering=0) as fh:
            while not self.stop.is_set() and written < self.limit:
                due = min(self.limit, self.rate * (time.time() - self.started_at))
                try:
                    while written + len(chunk) <= due:
                        written += fh.write(chunk)
                except OSError:
                    self.full_at = time.time()
                    return
                self.stop.wait(0.02)


def watched(
    path: Path, seconds: float, writer: PacedWriter, after: float = 1.0
) -> tuple[dict[str, float], list[Alert]]:
    """A real sampler at the default interval while ``writer`` runs (and ``after`` seconds
    more): when each code first fired."""
    sampler = make_sampler([str(path)], probe=False, gpu=False)
    first: dict[str, float] = {}
    alerts: list[Alert] = []

    def on_sample(sample: Sample) -> None:
        for a in sample.warnings:
            if a.code not in first:
                first[a.code] = sample.t
                alerts.append(a)

    sampler.subscribe(on_sample)
    with sampler:
        time.sleep(3.0)  # a steady start
        writer.start()
        writer.join(seconds)
        writer.stop.set()
        time.sleep(after)
    return first, alerts


def test_a_fast_fill_is_warned_about_before_half_way(judge, tmpfs_mount) -> None:
    """A download onto a small disk: ENOSPC 24 s after it starts."""
    m = tmpfs_mount("48m")
    writer = PacedWriter(m.path / "download.bin", 2 * MIB)
    first, alerts = watched(m.path, 60, writer)
    assert writer.full_at, "the writer never reached ENOSPC"
    half_way = writer.started_at + (writer.full_at - writer.started_at) / 2
    in_time = {c for c, t in first.items() if c != "disk-filling" or t <= half_way}
    judge(
        "tmpfs filled in 24 s",
        in_time,
        must={"disk-filling"},
        must_not={"slow-mount", "shared-mount", "mount-unresponsive", "checkpoint-wont-fit"},
        alerts=alerts,
    )


def test_a_slow_fill_beyond_the_horizon_and_a_burst_are_no_warning(judge, tmpfs_mount) -> None:
    big = tmpfs_mount("8g")  # tmpfs allocates only what is written
    writer = PacedWriter(big.path / "slow.bin", 1 * MIB, limit=20 * MIB)  # full in > 2 h
    first, alerts = watched(big.path, 20, writer)
    judge("1 MiB/s onto 8 GiB", first, alerts=alerts)
    small = tmpfs_mount("256m")
    burst = PacedWriter(small.path / "ckpt.pt", 24 * MIB, limit=48 * MIB)  # 2 s, 19 % of it
    first, alerts = watched(small.path, 15, burst, after=10.0)
    judge("one 48 MiB save onto 256 MiB", first, alerts=alerts)


# -- checkpoint-wont-fit on the layouts frameworks write ------------------------------


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))
    time.sleep(0.02)  # distinct modification times: the newest save is known


def lightning(run: Path, save: int) -> None:
    """Lightning's default layout (ModelCheckpoint under the logger's version directory),
    six saves and the last.ckpt copy; tests/core/storage/test_checkpoint_layouts.py writes it with
    Lightning itself."""
    ckpts = run / "lightning_logs" / "version_0" / "checkpoints"
    for step in range(1, 7):
        write(ckpts / f"epoch={step - 1}-step={step * 100}.ckpt", save)
    write(ckpts / "last.ckpt", save)


def hugging_face(run: Path, save: int) -> None:
    """Trainer's output_dir/checkpoint-<step>/ (transformers.trainer_utils
    PREFIX_CHECKPOINT_DIR): model, optimizer, scheduler and RNG state in one directory."""
    for step in (500, 1000, 1500):
        d = run / f"checkpoint-{step}"
        write(d / "model.safetensors", save // 3)
        write(d / "optimizer.pt", save - save // 3 - 8192)
        write(d / "scheduler.pt", 4096)
        write(d / "rng_state.pth", 4096)


def deepspeed(run: Path, save: int) -> None:
    """DeepSpeed's global_step<n>/ with a ``latest`` file naming the newest tag
    (deepspeed/runtime/engine.py, save_checkpoint)."""
    for step in (100, 200):
        d = run / f"global_step{step}"
        write(d / "mp_rank_00_model_states.pt", save // 2)
        write(d / "zero_pp_rank_0_mp_rank_00_optim_states.pt", save - save // 2)
    (run / "latest").write_text("global_step200")


LAYOUTS = {"lightning": lightning, "hugging-face": hugging_face, "deepspeed": deepspeed}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(("free_mib", "wont_fit"), [(12, False), (6, True)])
def test_checkpoint_wont_fit_knows_what_one_save_is(
    judge, tmpfs_mount, layout, free_mib, wont_fit
) -> None:
    """Issue 10: Lightning's checkpoints/ folder of six 9 MiB saves, watched at the run
    directory, was taken as one 54 MiB save ("only 10 MiB is free")."""
    m = tmpfs_mount("128m")
    run = m.path / "run"
    LAYOUTS[layout](run, 9 * MIB)
    st = os.statvfs(m.path)
    filler = st.f_bavail * st.f_frsize - free_mib * MIB
    write(m.path / "other-data.npy", filler)  # someone else's file takes the rest
    fired, alerts = checked(run)
    judge(
        f"{layout}, 9 MiB saves, {free_mib} MiB free",
        fired,
        must={"checkpoint-wont-fit"} if wont_fit else set(),
        must_not={"checkpoint-wont-fit", "slow-mount", "shared-mount", "mount-unresponsive"},
        alerts=alerts,
    )
    if wont_fit:
        (alert,) = (a for a in alerts if a.code == "checkpoint-wont-fit")
        assert "is 9 MiB" in alert.message, alert.message


def test_a_logdir_not_created_yet_on_a_slow_share_is_judged_before_the_run(
    judge, slow_sshfs_mount
) -> None:
    """Issue 10: `check` on a logdir about to be created answered `missing`; the slow share
    it would be written to was found only after the run had started."""
    fired, alerts = checked(slow_sshfs_mount.path / "runs" / "exp1")
    judge(
        "logdir not created yet, on sshfs across a 25 ms link",
        fired,
        must={"shared-mount", "slow-mount"},
        alerts=alerts,
    )


# -- issue 23: the fill a new user watched, on a real 40 MiB tmpfs, by an injected clock --

T0 = 1_800_000_000.0


class Clock:
    """The sampler's clock, moved by the test: one tick a second without waiting for it."""

    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def ticked(
    watch: list[Path], seconds: int, script: dict[int, list[tuple[Path, int]]]
) -> list[Sample]:
    """One sample a (simulated) second on the real filesystem; before tick ``i`` the files
    of ``script[i]`` are written for real (a negative size deletes the file)."""
    clock = Clock()
    sampler = make_sampler([str(p) for p in watch], probe=False, gpu=False, clock=clock)
    samples = []
    try:
        for i in range(seconds + 1):
            for path, size in script.get(i, ()):
                if size < 0:
                    path.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"\0" * size)
            clock.t = T0 + i
            samples.append(sampler.tick())
    finally:
        sampler.close()
    return samples


def test_checkpoints_a_pause_and_one_small_file_on_a_40_mib_tmpfs(judge, tmpfs_mount) -> None:
    """Issue 23 as seen: 12 x 3 MiB checkpoints (one every 10 s), a pause until Storage OK,
    one 1.5 MiB file, then nothing. It showed CRITICAL "filling at 253 kB/s ... full in
    about 10 s" for 74 samples while free space stood at 2.5 MiB."""
    m = tmpfs_mount("40m")
    ckpt, logs = m.path / "run" / "ckpt", m.path / "run" / "logs"
    script = {10 + 10 * k: [(ckpt / f"epoch={k}.ckpt", 3 * MIB)] for k in range(12)}
    script[170] = [(logs / "events.out", 3 * MIB // 2)]
    samples = ticked([ckpt.parent], 350, script)
    stopped = T0 + 120 + 2 * 10 + 1  # the last save, and the two gaps that take to tell
    after = [a for s in samples if s.t >= stopped for a in s.warnings]
    judge(
        "40 MiB tmpfs: 12 x 3 MiB every 10 s, a pause, 1.5 MiB",
        {a.code for a in after},
        must={"disk-almost-full"},  # 2.5 MiB of 40 MiB
        must_not={"disk-filling", "slow-mount", "shared-mount", "mount-unresponsive"},
        alerts=[a for a in after if a.code == "disk-filling"][:3],
    )
    assert samples[-1].paths[str(ckpt.parent)].avail_bytes == 5 * MIB // 2


def test_two_watched_paths_on_one_filesystem_get_one_warning_per_fact(tmpfs_mount) -> None:
    """Issue 23 item 2: a checkpoint dir and a logdir on one 40 MiB tmpfs got two identical
    disk-filling and disk-almost-full warnings ("where .../ckpt lives", "where .../logs
    lives"). Free space is the filesystem's: one warning, naming both."""
    m = tmpfs_mount("40m")
    ckpt, logs = m.path / "ckpt", m.path / "logs"
    ckpt.mkdir()
    script = {5 + k: [(logs / f"events.{k}", MIB)] for k in range(37)}  # 1 MiB/s
    samples = ticked([ckpt, logs], 45, script)
    fired: dict[str, list[Alert]] = {}
    for s in samples:
        for code in ("disk-filling", "disk-almost-full"):
            mine = [a for a in s.warnings if a.code == code]
            assert len(mine) <= 1, [a.message for a in mine]
            fired.setdefault(code, []).extend(mine)
    for code in ("disk-filling", "disk-almost-full"):
        assert fired.get(code), f"no {code}"
        message = fired[code][-1].message
        # each path by its last two names (issue 36: the numbers first, short paths last)
        assert f"{ckpt.parent.name}/{ckpt.name}" in message, message
        assert f"{logs.parent.name}/{logs.name}" in message, message
