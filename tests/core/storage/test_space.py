"""Space fields, the least-squares fill estimate on a real tmpfs being filled, and the
checkpoint scan over real files."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from trainwatch_lab.core.storage.fill import fill_estimate
from trainwatch_lab.core.storage.space import scan_checkpoints, space_fields

MIB = 1024 * 1024


# -- on a real filesystem -----------------------------------------------------------------
def df_bytes(path: Path) -> tuple[int, int]:
    out = subprocess.run(
        ["df", "-B1", "--output=size,avail", str(path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.split()
    return int(out[-2]), int(out[-1])


@pytest.fixture
def tmpfs(tmpfs_mount) -> Path:
    """A 32 MiB tmpfs (tests/support/mounts.py mounts and unmounts it; marked root + mount)."""
    return tmpfs_mount("32m").path


def test_space_fields_agree_with_df(tmpfs: Path) -> None:
    (tmpfs / "blob").write_bytes(b"\0" * (3 * MIB))
    fields = space_fields(os.statvfs(tmpfs))
    size, avail = df_bytes(tmpfs)
    assert fields["total_bytes"] == size == 32 * MIB
    assert fields["avail_bytes"] == avail
    assert fields["free_bytes"] >= fields["avail_bytes"]
    assert fields["total_bytes"] - fields["avail_bytes"] >= 3 * MIB
    assert fields["inodes_total"] > fields["inodes_free"] > 0


def test_time_to_full_on_a_tmpfs_filled_at_a_steady_rate(tmpfs: Path) -> None:
    rate = 8 * MIB  # bytes per second; 32 MiB fill in about 4 s
    chunk = 256 * 1024
    full_at: list[float] = []
    stop = threading.Event()

    def writer() -> None:
        start = time.monotonic()
        fd = os.open(tmpfs / "fill.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        block = b"\1" * chunk
        written = 0
        try:
            while not stop.is_set():
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        full_at.append(time.monotonic())
                        return
                    raise
                written += chunk
                delay = start + written / rate - time.monotonic()  # absolute schedule
                if delay > 0:
                    time.sleep(delay)
        finally:
            os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        times, avail = [], []
        for _ in range(15):  # 1.5 s of readings, as the sampler would take them
            time.sleep(0.1)
            times.append(time.monotonic())
            avail.append(space_fields(os.statvfs(tmpfs))["avail_bytes"])
        est = fill_estimate(times, avail)
        thread.join(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert full_at, "the writer never hit ENOSPC"
    assert est is not None and est.seconds_to_full is not None
    truth = full_at[0] - times[-1]
    assert truth > 1.0  # the estimate was made well before the disk was full
    assert est.seconds_to_full == pytest.approx(truth, rel=0.25)
    assert est.rate_bps == pytest.approx(rate, rel=0.25)


# -- scan_checkpoints ---------------------------------------------------------------------
def make(path: Path, size: int, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    os.utime(path, (mtime, mtime))
    return path


BASE = 1_700_000_000.0


def test_regular_cadence(tmp_path: Path) -> None:
    jitter = [0, 12, -20, 5, 30]
    for i, j in enumerate(jitter):
        make(tmp_path / f"epoch={i}-step={100 * i}.ckpt", 1000 + i, BASE + 600 * i + j)
    make(tmp_path / "metrics.csv", 10, BASE + 5000)  # not a checkpoint
    info = scan_checkpoints(str(tmp_path))
    assert info is not None
    assert info.count == 5
    assert info.newest_path == str(tmp_path / "epoch=4-step=400.ckpt")
    assert info.newest_bytes == 1004
    assert info.newest_mtime == pytest.approx(BASE + 2430)
    # saves at 0, 612, 1180, 1805, 2430 s: gaps 612, 568, 625, 625 -> median 618.5
    assert info.cadence_s == pytest.approx(618.5)


def test_irregular_or_too_few_saves_have_no_cadence(tmp_path: Path) -> None:
    for i, t in enumerate([0, 60, 3060, 3160, 4060]):
        make(tmp_path / "irregular" / f"model_{i}.pt", 10, BASE + t)
    info = scan_checkpoints(str(tmp_path / "irregular"))
    assert info is not None and info.count == 5 and info.cadence_s is None
    for i in range(2):
        make(tmp_path / "two" / f"model_{i}.pth", 10, BASE + 600 * i)
    info = scan_checkpoints(str(tmp_path / "two"))
    assert info is not None and info.count == 2 and info.cadence_s is None


def test_hugging_face_layout(tmp_path: Path) -> None:
    for step in (500, 1000, 1500):
        d = tmp_path / f"checkpoint-{step}"
        t = BASE + step
        make(d / "model.safetensors", 4000, t)
        make(d / "optimizer.pt", 8000, t + 3)
        make(d / "trainer_state.json", 100, t + 4)
    make(tmp_path / "runs" / "events.out.tfevents", 50, BASE + 9999)  # logs, no checkpoint
    info = scan_checkpoints(str(tmp_path))
    assert info is not None
    assert info.count == 3
    assert info.newest_path == str(tmp_path / "checkpoint-1500")
    assert info.newest_bytes == 12100  # everything the next save will need again
    assert info.newest_mtime == pytest.approx(BASE + 1504)
    assert info.cadence_s == pytest.approx(500)


def test_no_checkpoints_or_no_directory(tmp_path: Path) -> None:
    make(tmp_path / "notes.txt", 10, BASE)
    make(tmp_path / "sub" / "data.csv", 10, BASE)
    assert scan_checkpoints(str(tmp_path)) is None
    assert scan_checkpoints(str(tmp_path / "missing")) is None


def test_symlinks_are_not_followed_and_scan_is_bounded(tmp_path: Path) -> None:
    for i in range(4):
        make(tmp_path / f"step{i}.ckpt", 100, BASE + 60 * i)
    os.symlink(tmp_path / "step3.ckpt", tmp_path / "last.ckpt")
    os.symlink(tmp_path, tmp_path / "loop")  # a directory loop
    os.symlink(tmp_path / "gone.ckpt", tmp_path / "dangling.ckpt")
    info = scan_checkpoints(str(tmp_path))
    assert info is not None and info.count == 4
    assert info.cadence_s == pytest.approx(60)

    big = tmp_path / "big"
    for i in range(50):
        make(big / f"s{i:02d}.pt", 1, BASE + i)
    bounded = scan_checkpoints(str(big), max_entries=10)
    assert bounded is not None and bounded.count == 10


def test_custom_suffixes(tmp_path: Path) -> None:
    make(tmp_path / "weights.npz", 10, BASE)
    assert scan_checkpoints(str(tmp_path)) is None
    info = scan_checkpoints(str(tmp_path), suffixes=(".npz",))
    assert info is not None and info.count == 1


def test_scan_stops_at_its_budget_and_reports_what_it_saw(tmp_path: Path) -> None:
    for i in range(20):
        make(tmp_path / f"s{i:02d}.pt", 1, BASE + i)
    assert scan_checkpoints(str(tmp_path), budget_s=0.0) is None  # out of time at once
    info = scan_checkpoints(str(tmp_path), budget_s=60.0)
    assert info is not None and info.count == 20
