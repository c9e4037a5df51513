"""The storage rules and the CLI on real filesystems mounted by the fixtures in
tests/support/mounts.py (loaded by tests/conftest.py): tmpfs, loop ext4, a read-only mount,
sshfs to a local sshd, and the same sshfs with its server paused (a dead network mount)."""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import struct
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from statistics import median

import pytest

from tests.support.mounts import MOUNT_SOURCE, run, unmount
from trainwatch_lab.advice.check import run_check
from trainwatch_lab.core.defaults import DEFAULTS, MIB
from trainwatch_lab.core.guard.guard import MountGuard
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.storage.mounts import mount_for_path, read_mounts
from trainwatch_lab.core.storage.probe import LEFTOVER
from trainwatch_lab.monitor import make_sampler

ROOT = Path(__file__).resolve().parents[1]


def tw(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd="/",
    )


def codes(report: dict, subject: str) -> dict[str, dict]:
    return {w["code"]: w for w in report["warnings"] if w["subject"] == subject}


def fill(path: Path, name: str, nbytes: int) -> None:
    with open(path / name, "wb") as fh:
        fh.write(b"\xa5" * nbytes)


# -- disk-filling ---------------------------------------------------------------------


class SteadyWriter(threading.Thread):
    """Writes at ``rate`` bytes/s (paced on elapsed time, so the average stays exact)
    until ENOSPC; records when the filesystem was really full."""

    def __init__(self, directory: Path, rate: float) -> None:
        super().__init__(daemon=True)
        self.directory, self.rate = directory, rate
        self.started_at = self.full_at = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        chunk = b"\x5a" * (64 * 1024)
        written = 0
        self.started_at = time.time()
        with open(self.directory / "data.bin", "wb", buffering=0) as fh:
            while not self.stop.is_set():
                due = self.rate * (time.time() - self.started_at)
                try:
                    while written + len(chunk) <= due:
                        written += fh.write(chunk)
                except OSError:  # ENOSPC: the truth the prediction is measured against
                    self.full_at = time.time()
                    return
                self.stop.wait(0.01)


def test_disk_filling_fires_early_with_time_to_full_within_25_percent(tmpfs_mount) -> None:
    m = tmpfs_mount("40m")
    rate = 4 * MIB  # bytes/s: the 40 MiB tmpfs is full after ~10 s
    defaults = replace(DEFAULTS, fill_window_s=3.0, fill_min_span_s=1.5, fill_min_trend_s=1.0)
    sampler = make_sampler([str(m.path)], interval=0.2, probe=False, gpu=False, defaults=defaults)
    alerts: list[tuple[float, str, str]] = []  # (t, severity, message)
    estimates: list[tuple[float, float]] = []  # (t, predicted seconds to full)

    def on_sample(sample: Sample) -> None:
        for a in sample.warnings:
            if a.code == "disk-filling" and a.subject == str(m.path):
                alerts.append((sample.t, a.severity, a.message))
                est = sample.paths[str(m.path)].fill  # what every surface shows
                assert est is not None and est.seconds_to_full is not None
                estimates.append((sample.t, est.seconds_to_full))

    sampler.subscribe(on_sample)
    writer = SteadyWriter(m.path, rate)
    with sampler:
        time.sleep(1.0)  # a steady baseline first
        writer.start()
        writer.join(60)
        time.sleep(0.5)
    writer.stop.set()
    assert writer.full_at, "the writer never reached ENOSPC"
    assert alerts, "disk-filling never fired"
    first_t, severity, message = alerts[0]
    fill_time = writer.full_at - writer.started_at
    left_at_alert = writer.full_at - first_t
    assert left_at_alert > 0.5 * fill_time  # well before ENOSPC
    assert severity == "critical" and "B/s" in message and "full in about" in message
    # once the least-squares window holds only the steady fill, every prediction made
    # before the disk was full lands within 25 % of the true remaining time
    errors = [
        abs(t + ttf - writer.full_at) / (writer.full_at - t)
        for t, ttf in estimates
        if t >= writer.started_at + defaults.fill_window_s and writer.full_at - t > 1.0
    ]
    assert len(errors) >= 5 and max(errors) < 0.25, errors
    print(
        f"\nfill: {fill_time:.1f} s to ENOSPC, first alert {left_at_alert:.1f} s before it; "
        f"time-to-full error over {len(errors)} predictions: max {max(errors):.1%}, "
        f"mean {sum(errors) / len(errors):.1%}"
    )


# -- disk-almost-full, read-only, checkpoint-wont-fit ---------------------------------


def test_watch_prints_a_warning_once_and_exits_1(tmpfs_mount) -> None:
    m = tmpfs_mount("8m")
    fill(m.path, "big.bin", 7 * MIB + 768 * 1024)  # 256 KiB left: 3 % free
    out = tw("watch", "--interval", "0.3", "--duration", "2", str(m.path), str(m.path / "new"))
    assert out.returncode == 1, out.stderr
    assert out.stdout.count("FILL RATE") >= 4  # several samples ...
    # ... one warning for the filesystem, naming both paths (issue 23: one fact, one warning)
    assert out.stdout.count(f"disk-almost-full: {m.path}\n") == 1
    assert out.stdout.count("disk-almost-full") == 1
    assert f"free on {m.path}; …/{m.path.name}/new lives there" in out.stdout
    assert f"{m.path / 'new'} (not created yet)" in out.stdout
    # 256 KiB, less what the latency probes (16 x 4 KiB each, now started at once in our own
    # process) hold at that moment
    assert re.search(r"Only (2[0-5]\d|1\d\d) KiB of 8 MiB", out.stdout), out.stdout


def test_disk_almost_full_on_loop_ext4(loop_ext4) -> None:
    m = loop_ext4(size_mb=32)
    empty = json.loads(tw("check", "--json", "--no-probe", str(m.path)).stdout)
    (entry,) = empty["paths"]
    assert entry["fstype"] == "ext4" and entry["device"] == m.device
    assert "disk-almost-full" not in codes(empty, str(m.path))

    st = os.statvfs(m.path)
    fill(m.path, "big.bin", st.f_bavail * st.f_frsize - 1 * MIB)
    out = tw("check", "--json", "--no-probe", str(m.path))
    report = json.loads(out.stdout)
    warning = codes(report, str(m.path))["disk-almost-full"]
    assert "MiB" in warning["message"] and "Free at least" in warning["fix"]
    assert out.returncode == 1


def test_read_only_mount_is_reported_and_never_written(readonly_mount) -> None:
    before = sorted(os.listdir(readonly_mount.path))
    out = tw("check", "--json", str(readonly_mount.path))
    (entry,) = json.loads(out.stdout)["paths"]
    assert entry["read_only"] is True and entry["fstype"] == "tmpfs"
    assert entry["probe"] is None
    assert entry["verdict"] == "ok"
    assert sorted(os.listdir(readonly_mount.path)) == before
    human = tw("check", str(readonly_mount.path)).stdout
    assert "read-only" in human and "memory, ro" in human


def test_checkpoint_wont_fit_on_a_small_tmpfs(tmpfs_mount) -> None:
    m = tmpfs_mount("16m")
    now = time.time()
    for i, age in enumerate((1300, 700, 100)):  # saved every 10 min, the last 100 s ago
        name = f"epoch={i}.ckpt"
        fill(m.path, name, 5 * MIB)  # 15 of 16 MiB used: 1 MiB left
        os.utime(m.path / name, (now - age, now - age))
    out = tw("check", "--json", "--no-probe", str(m.path))
    report = json.loads(out.stdout)
    warning = codes(report, str(m.path))["checkpoint-wont-fit"]
    assert warning["severity"] == "critical"
    assert "epoch=2.ckpt" in warning["message"] and "5 MiB" in warning["message"]
    assert "every 10 min" in warning["message"] and "due in about" in warning["message"]
    assert out.returncode == 1


# -- sshfs: shared, slower than local; then dead ---------------------------------------


def test_sshfs_is_shared_and_slower_than_the_same_storage_locally(
    sshfs_mount, tmp_path: Path
) -> None:
    report = run_check([str(sshfs_mount.path), str(tmp_path)], timeout=5)
    remote, local = report.states
    assert remote.fstype == "fuse.sshfs" and remote.shared and remote.kind == "shared"
    assert report.verdicts[0] in ("shared", "slow")
    assert local.kind == "local" and not local.shared
    assert ("shared-mount", str(sshfs_mount.path)) in {a.key for a in report.alerts}
    out = tw("check", "--json", str(sshfs_mount.path))
    assert out.returncode == 1
    assert "shared-mount" in codes(json.loads(out.stdout), str(sshfs_mount.path))
    assert list(tmp_path.iterdir()) == []
    # The probe through the network filesystem against the very storage it exports, reached
    # locally. On this VM a local-disk fsync swings between 0.1 and 4 ms from one run to the
    # next, which drowns a loopback round trip, so the exported directory is a tmpfs (µs):
    # what is left is the cost of the network filesystem itself.
    exported = sshfs_mount.remote / "work"
    run(["mount", "-t", "tmpfs", "-o", "size=8m", MOUNT_SOURCE, str(exported)])
    try:
        remote_p50, local_p50 = [], []
        for _ in range(3):
            for target, into in ((sshfs_mount.path, remote_p50), (exported, local_p50)):
                (s,) = run_check([str(target)], timeout=5).states
                assert s.probe is not None and s.probe.p50_ms is not None, s
                into.append(s.probe.p50_ms)
        assert os.listdir(exported) == []  # the probe files were removed
    finally:
        unmount(exported)
    assert median(remote_p50) > median(local_p50), (remote_p50, local_p50)
    print(
        f"\nprobe p50 (median of 3): through sshfs {median(remote_p50):.3f} ms, "
        f"same tmpfs locally {median(local_p50):.3f} ms"
    )


def test_check_on_a_dead_sshfs_mount_answers_within_its_timeout(sshfs_mount) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "trainwatch_lab", "check", "--json", "--timeout", "2"]
    sshfs_mount.pause()
    proc = None
    try:
        started = time.monotonic()
        proc = subprocess.Popen(
            [*cmd, str(sshfs_mount.path)],
            stdout=subprocess.PIPE,
            # a pipe on purpose: a helper stuck on the mount must not hold it open
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd="/",
        )
        # generous: a check that hangs fails here instead of hanging the suite
        stdout, stderr = proc.communicate(timeout=20)
        elapsed = time.monotonic() - started
    finally:
        sshfs_mount.resume()  # first: a process stuck on the mount can only die after this
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
    report = json.loads(stdout)
    (entry,) = report["paths"]
    assert entry["verdict"] == "unresponsive" and entry["fstype"] == "fuse.sshfs"
    assert entry["shared"] is True
    warning = codes(report, str(sshfs_mount.path))["mount-unresponsive"]
    assert warning["severity"] == "critical" and "2 s" in warning["message"]
    assert proc.returncode == 1 and "Traceback" not in stderr
    print(f"\ncheck on a dead sshfs mount: {elapsed:.2f} s (timeout 2 s)")


def test_checking_a_dead_mount_again_starts_no_second_stuck_helper(sshfs_mount) -> None:
    guard = MountGuard()
    sshfs_mount.pause()
    try:
        first = run_check([str(sshfs_mount.path)], timeout=1, guard=guard)
        second = run_check([str(sshfs_mount.path)], timeout=1, guard=guard)
        stuck = guard.stuck_pids(str(sshfs_mount.mountpoint))
    finally:
        sshfs_mount.resume()
        guard.close()
    assert first.verdicts == ["unresponsive"] and second.verdicts == ["unresponsive"]
    assert len(stuck) <= 1  # at most one helper per mount waits on the dead server


# -- a logdir not created yet; odd paths (issue 10, items 4 and 9) ---------------------


class Created:
    """Names created in a directory while we watch, as inotify reports them: a probe file
    created and removed within a millisecond is still seen (a listing afterwards is not)."""

    IN_CREATE = 0x100

    def __init__(self, directory: Path | str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self.fd, os.fsencode(directory), self.IN_CREATE) < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")

    def names(self) -> list[str]:
        found: list[str] = []
        try:
            while True:
                try:
                    data = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    return found
                offset = 0
                while offset < len(data):  # struct inotify_event: wd, mask, cookie, len, name
                    _, _, _, length = struct.unpack_from("iIII", data, offset)
                    name = data[offset + 16 : offset + 16 + length].rstrip(b"\0")
                    found.append(os.fsdecode(name))
                    offset += 16 + length
        finally:
            os.close(self.fd)


def probe_files(names: list[str]) -> list[str]:
    return [n for n in names if LEFTOVER.match(n)]


def test_a_new_logdir_on_sshfs_is_shared_and_probed_in_its_existing_ancestor(
    sshfs_mount,
) -> None:
    later = sshfs_mount.path / "runs" / "exp1"
    exported = sshfs_mount.remote / "work"  # what sshfs_mount.path shows, on the server side
    created = Created(exported)
    out = tw("check", "--json", str(later))
    written = probe_files(created.names())
    assert out.returncode == 1, out.stderr
    (entry,) = json.loads(out.stdout)["paths"]
    assert entry["verdict"] == "shared" and entry["fstype"] == "fuse.sshfs"
    assert entry["checked_at"] == str(sshfs_mount.path)
    assert entry["note"] == f"not created yet; checked at {sshfs_mount.path}"
    assert entry["probe"]["samples"] > 0
    assert written, "the probe wrote nothing where the run will write"
    assert os.listdir(exported) == []  # the probe file removed; runs/ not created
    human = tw("check", str(later))
    assert human.returncode == 1 and human.stderr == ""
    row = human.stdout.splitlines()[1].split()
    assert row[0] == str(later) and row[1:3] == ["fuse.sshfs", "shared"] and row[-1] == "shared"
    assert f"{later}: not created yet; checked at {sshfs_mount.path}\n" in human.stdout


CHECK = [sys.executable, "-m", "trainwatch_lab", "check"]


def test_a_new_logdir_on_a_paused_sshfs_is_unresponsive(sshfs_mount) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    later = sshfs_mount.path / "runs" / "exp1"
    sshfs_mount.pause()
    proc = None
    try:
        proc = subprocess.Popen(
            [*CHECK, "--json", "--timeout", "1", str(later)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd="/",
        )
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        sshfs_mount.resume()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
    (entry,) = json.loads(stdout)["paths"]
    assert entry["verdict"] == "unresponsive" and entry["fstype"] == "fuse.sshfs"
    assert entry["checked_at"] is None and entry["probe"] is None  # nothing answered
    assert proc.returncode == 1 and "Traceback" not in stderr


def test_a_new_logdir_on_tmpfs_is_ok_with_a_note(tmpfs_mount) -> None:
    m = tmpfs_mount("16m")
    later = m.path / "runs" / "exp1"
    created = Created(m.path)
    out = tw("check", "--json", str(later))
    written = probe_files(created.names())
    assert out.returncode == 0, out.stderr
    (entry,) = json.loads(out.stdout)["paths"]
    assert (entry["verdict"], entry["fstype"], entry["checked_at"]) == ("ok", "tmpfs", str(m.path))
    assert entry["note"] == f"not created yet; checked at {m.path}"
    assert entry["probe"]["samples"] > 0 and written  # (also: the watcher sees probe files)
    assert os.listdir(m.path) == []


def test_no_probe_file_is_ever_created_in_dev() -> None:
    """/dev is devtmpfs (statvfs says tmpfs): check writes nothing there, nor for a device
    in it, nor for a logdir "to be created" under it. The watcher does see probe files
    (test_a_new_logdir_on_tmpfs_is_ok_with_a_note), so an empty list means none."""
    if mount_for_path("/dev", read_mounts()).fstype != "devtmpfs":
        pytest.skip("/dev is no devtmpfs here")
    created = Created("/dev")
    out = tw("check", "--json", "/dev", "/dev/null", "/dev/not-yet/x")
    names = created.names()
    assert out.returncode == 0, out.stderr
    verdicts = [e["verdict"] for e in json.loads(out.stdout)["paths"]]
    assert verdicts == ["not-storage"] * 3
    assert probe_files(names) == [] and "not-yet" not in names


def test_a_newline_in_a_name_is_one_escaped_table_row(tmpfs_mount) -> None:
    m = tmpfs_mount("8m")
    odd = m.path / "run\n1"
    odd.mkdir()
    later = m.path / "new\trun\n2"
    out = tw("check", "--no-probe", str(odd), str(later), str(m.path))
    assert out.returncode == 0, out.stderr
    _, *rows = out.stdout.split("\n\n")[0].splitlines()
    assert len(rows) == 3 + 1  # three paths, then the note of the one not created yet
    assert rows[0].split()[0] == f"{m.path}/run\\n1" and rows[0].split()[-1] == "ok"
    assert rows[1].split()[0] == f"{m.path}/new\\trun\\n2"
    assert rows[3] == f"{m.path}/new\\trun\\n2: not created yet; checked at {m.path}"
    assert "run\n1" not in out.stdout  # no raw newline of a name anywhere
    as_json = json.loads(tw("check", "--json", "--no-probe", str(odd)).stdout)
    assert as_json["paths"][0]["path"] == str(odd)  # JSON keeps the name exactly


def df(path: Path) -> dict[str, int]:
    """What `df -B1` says: Size, Used, Avail and Use% (rounded up, as df does)."""
    out = run(["df", "-B1", "--output=size,used,avail,pcent", str(path)]).splitlines()[-1]
    size, used, avail, pcent = out.split()
    return {"size": int(size), "used": int(used), "avail": int(avail), "pcent": int(pcent[:-1])}


def test_space_numbers_follow_df_on_ext4_with_reserved_blocks(loop_ext4) -> None:
    """Issue 23 item 7: df said / was 25 % used; the chart and `watch` said 70 % used (avail
    over size, ~150 GB reserved for root), and JSON's free_bytes was not the free space
    shown beside it. Used % is df's used / (used + avail); free is Avail; the reserve is
    named; check --json and watch --json use the same names for the same numbers."""
    m = loop_ext4(64, reserved_pct=20)
    fill(m.path, "data.bin", 16 * MIB)
    want = df(m.path)
    use = want["used"] / (want["used"] + want["avail"])
    assert want["pcent"] == math.ceil(100 * use)  # what df prints, to the percent
    (entry,) = json.loads(tw("check", "--json", "--no-probe", str(m.path)).stdout)["paths"]
    line = json.loads(
        tw(
            "watch", "--json", "--interval", "0.3", "--duration", "1", str(m.path)
        ).stdout.splitlines()[0]
    )["paths"][str(m.path)]
    for got in (entry, line):
        assert got["total_bytes"] == want["size"]
        assert got["avail_bytes"] == want["avail"] and got["used_bytes"] == want["used"]
        assert got["reserved_bytes"] == want["size"] - want["used"] - want["avail"]
        assert abs(got["used_pct"] - 100 * use) < 0.01
    table = tw("watch", "--interval", "0.3", "--duration", "1", str(m.path)).stdout
    row = next(r for r in table.splitlines() if r.strip().startswith(str(m.path)))
    assert f" {100 * use:.0f} %" in row, (row, want)
    # nearly full for a user: the warning's share is df's, and it names the reserve
    st = os.statvfs(m.path)
    fill(m.path, "more.bin", st.f_bavail * st.f_frsize - 2 * MIB)
    want = df(m.path)
    report = json.loads(tw("check", "--json", "--no-probe", str(m.path)).stdout)
    warning = codes(report, str(m.path))["disk-almost-full"]
    free = want["avail"] / (want["used"] + want["avail"])
    assert f"({100 * free:.1f} %) is free" in warning["message"], (warning, want)
    reserved = (want["size"] - want["used"] - want["avail"]) / want["size"]
    assert f"({100 * reserved:.0f} % reserved for root)" in warning["message"], warning


@pytest.mark.parametrize(("free_kib", "fires"), [(4096, True), (4096 + 64, False)])
def test_disk_almost_full_at_exactly_10_percent_of_a_40_mib_tmpfs(
    tmpfs_mount, free_kib, fires
) -> None:
    """Issue 23 item 12: README says "10 % or less": 4 MiB free of 40 MiB is 10 %."""
    m = tmpfs_mount("40m")
    st = os.statvfs(m.path)
    fill(m.path, "big.bin", st.f_bavail * st.f_frsize - free_kib * 1024)
    assert df(m.path)["avail"] == free_kib * 1024
    report = json.loads(tw("check", "--json", "--no-probe", str(m.path)).stdout)
    assert ("disk-almost-full" in codes(report, str(m.path))) == fires
