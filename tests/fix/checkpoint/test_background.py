"""save_checkpoint(..., background=True) on a small tmpfs: the handle, one save in flight
(a second waits or is refused), the same no-partial-file guarantees, and the status."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest

from tests.fix.checkpoint.test_save import MIB, listing, writer
from trainwatch_lab.fix import SaveHandle, SaveInFlight, checkpoint_status, save_checkpoint
from trainwatch_lab.fix.space import CheckpointWontFit


def gated(size: int, gate: threading.Event, fill: bytes = b"x"):
    """A save that writes half, then waits for ``gate``: a save held in flight."""

    def save(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(fill * (size // 2))
            fh.flush()
            assert gate.wait(20)
            fh.write(fill * (size - size // 2))

    return save


def test_the_handle_waits_and_the_status_says_how_long(tmpfs_mount) -> None:
    disk = tmpfs_mount("16m").path
    gate = threading.Event()
    handle = save_checkpoint(gated(2 * MIB, gate), disk / "epoch-1.pt", background=True)
    assert isinstance(handle, SaveHandle) and not handle.done()
    status = checkpoint_status()
    assert status.in_flight and status.background and status.path == str(disk / "epoch-1.pt")
    with pytest.raises(TimeoutError):
        handle.wait(0.05)
    assert not (disk / "epoch-1.pt").exists()  # only a hidden temporary name so far
    time.sleep(0.2)
    gate.set()
    assert handle.wait(20) == str(disk / "epoch-1.pt")
    assert listing(disk) == {"epoch-1.pt": 2 * MIB}
    status = checkpoint_status()
    assert not status.in_flight and status.last_ok and status.last_error is None
    assert status.last_path == str(disk / "epoch-1.pt")
    assert status.last_duration_s == handle.duration_s and handle.duration_s >= 0.2
    assert set(status.to_json()) >= {"in_flight", "last_duration_s", "last_ok"}


def test_a_second_save_is_refused_or_waits(tmpfs_mount) -> None:
    disk = tmpfs_mount("16m").path
    gate = threading.Event()
    first = save_checkpoint(gated(MIB, gate), disk / "a-1.pt", background=True)
    called = []
    with pytest.raises(SaveInFlight, match="in flight"):
        save_checkpoint(lambda p: called.append(p), disk / "a-2.pt", if_busy="refuse")
    with pytest.raises(SaveInFlight):
        save_checkpoint(writer(1), disk / "a-2.pt", background=True, if_busy="refuse")
    assert called == []
    threading.Timer(0.3, gate.set).start()
    start = time.monotonic()
    second = save_checkpoint(writer(MIB, b"b"), disk / "a-2.pt", background=True)  # waits
    assert time.monotonic() - start >= 0.25 and first.done()
    assert second.wait(20) == str(disk / "a-2.pt")
    assert listing(disk) == {"a-1.pt": MIB, "a-2.pt": MIB}
    with pytest.raises(ValueError, match="if_busy"):
        save_checkpoint(writer(1), disk / "a-3.pt", if_busy="later")


def test_a_background_save_that_will_not_fit_changes_nothing(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(3 * MIB), disk / "epoch-1.pt")
    save_checkpoint(writer(3 * MIB), disk / "epoch-2.pt")
    before = listing(disk)
    handle = save_checkpoint(writer(3 * MIB), disk / "epoch-3.pt", background=True)
    with pytest.raises(CheckpointWontFit) as info:
        handle.wait(20)
    assert info.value.errno == errno.ENOSPC
    assert listing(disk) == before
    status = checkpoint_status()
    assert status.last_ok is False and "CheckpointWontFit" in (status.last_error or "")


def test_a_disk_that_fills_mid_background_write_leaves_no_partial_file(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(MIB, b"g"), disk / "step-1.pt")
    before, free = listing(disk), os.statvfs(disk).f_bavail

    def too_big(path: str) -> None:
        with open(path, "wb") as fh:
            for _ in range(64):
                fh.write(b"x" * MIB)
                fh.flush()

    handle = save_checkpoint(too_big, disk / "step-2.pt", background=True)
    with pytest.raises(OSError) as info:
        handle.wait(20)
    assert info.value.errno == errno.ENOSPC
    assert listing(disk) == before and os.statvfs(disk).f_bavail == free
    assert (disk / "step-1.pt").read_bytes() == b"g" * MIB
    # the slot is free again: the next save goes through at once
    assert save_checkpoint(writer(MIB), disk / "step-3.pt", if_busy="refuse")


def test_bad_arguments_raise_in_the_caller(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        save_checkpoint("not callable", tmp_path / "x.pt", background=True)  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        save_checkpoint(writer(1), tmp_path / "x.pt", keep=0, background=True)
    assert listing(tmp_path) == {} and not checkpoint_status().in_flight
