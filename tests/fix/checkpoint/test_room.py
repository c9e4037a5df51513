"""fix.checkpoint.room: a save that would not fit goes to ``fallback=``, or waits for room
(``on_full="wait"``), and each choice is said, notified and recorded (issue 38). Real tmpfs
and loop ext4 mounts; the waits run on an injected clock and sleep (no wall-clock races)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trainwatch_lab.core.model import Alert
from trainwatch_lab.core.record import Store, choose
from trainwatch_lab.core.record.why import Ending, explain
from trainwatch_lab.fix import report
from trainwatch_lab.fix.checkpoint import events, room
from trainwatch_lab.fix.checkpoint.manifest import MANIFEST
from trainwatch_lab.fix.checkpoint.save import save_checkpoint
from trainwatch_lab.fix.space import CheckpointWontFit

MIB = 1024 * 1024


def writer(data: bytes) -> Callable[[str], None]:
    def save(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(data)

    return save


def listing(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir() if p.name != MANIFEST}


def events_since(t0: float, subject: str) -> list[tuple[str, str]]:
    """The save events about ``subject`` since ``t0``, once this process's own have landed
    (a thread of their own writes them: reading at once raced it)."""
    events._writer.drain(60.0)
    store = Store(choose().path)
    try:
        found = store.events(t0 - 1, time.time() + 5)
    finally:
        store.close()
    return [(e.kind, e.text) for e in found if e.kind.startswith("save-") and e.subject == subject]


class FakeTime:
    """The wait's clock and sleep: each sleep moves the clock on, and may run ``on_sleep``
    (another process freeing space, as far as the save can tell)."""

    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


@pytest.fixture
def channel() -> Callable[[], list[tuple[str, Alert]]]:
    heard: list[tuple[str, Alert]] = []

    def hear(alert: Alert, state: str) -> None:
        heard.append((state, alert))

    report.add_channel(hear)
    yield lambda: heard
    report.remove_channel(hear)


def full_disk(tmpfs_mount) -> Path:
    """An 8 MiB tmpfs holding one 3 MiB save and a filler: no room for the next save."""
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(b"a" * (3 * MIB)), disk / "epoch-1.pt")
    (disk / "filler").write_bytes(b"f" * (3 * MIB))
    return disk


def test_a_save_that_will_not_fit_goes_to_the_fallback_and_says_where(
    tmpfs_mount, channel, caplog: pytest.LogCaptureFixture
) -> None:
    disk = full_disk(tmpfs_mount)
    other = tmpfs_mount("16m").path / "ckpt"
    before = listing(disk)
    t0 = time.time()
    out = save_checkpoint(writer(b"b" * (3 * MIB)), disk / "epoch-2.pt", fallback=other)
    assert out == str(other / "epoch-2.pt")
    assert (other / "epoch-2.pt").read_bytes() == b"b" * (3 * MIB)
    assert listing(disk) == before  # nothing written where it would not fit
    assert f"saved to {other}/epoch-2.pt instead of {disk}" in caplog.text
    ((state, alert),) = channel()
    assert state == "started" and alert.code == "checkpoint-wont-fit"
    assert [k for k, _ in events_since(t0, str(disk))] == ["save-redirected"]


def test_a_full_fallback_too_is_one_error_naming_both(tmpfs_mount) -> None:
    disk = full_disk(tmpfs_mount)
    small = tmpfs_mount("1m").path
    with pytest.raises(CheckpointWontFit) as info:
        save_checkpoint(writer(b"b"), disk / "epoch-2.pt", fallback=small)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert str(disk) in str(info.value) and f"will not fit in {small}" in notes
    assert listing(small) == {}


def test_waiting_gives_up_after_the_limit_with_nothing_written(
    tmpfs_mount, channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = full_disk(tmpfs_mount)
    fake = FakeTime()
    monkeypatch.setattr(room, "CLOCK", fake.clock)
    monkeypatch.setattr(room, "SLEEP", fake.sleep)
    before = listing(disk)
    called: list[str] = []
    t0 = time.time()
    with pytest.raises(CheckpointWontFit, match=r"waited 2 min 00 s for space") as info:
        save_checkpoint(called.append, disk / "epoch-2.pt", on_full="wait", wait_limit_s=120,
                        recheck_s=5)  # fmt: skip
    assert called == [] and listing(disk) == before
    assert "Nothing was written; the earlier saves are intact" in str(info.value)
    assert fake.sleeps == [5.0] * 24  # checked every 5 s for 2 min, never slept past it
    assert [s for s, _ in channel()] == ["started", "cleared"]
    paused = channel()[0][1]
    assert "gives up in 2 min 00 s" in paused.message
    assert paused.fix.startswith(f"Free 1.0 MiB in {disk}")
    kinds = [k for k, _ in events_since(t0, str(disk))]
    assert kinds == ["save-paused", "save-gave-up"]


def test_waiting_resumes_when_space_returns_and_history_why_tells_it(
    tmpfs_mount, channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = full_disk(tmpfs_mount)

    def someone_frees_space(n: int) -> None:
        if n == 3:
            (disk / "filler").unlink()

    fake = FakeTime(someone_frees_space)
    monkeypatch.setattr(room, "CLOCK", fake.clock)
    monkeypatch.setattr(room, "SLEEP", fake.sleep)
    t0 = time.time()
    out = save_checkpoint(writer(b"b" * (3 * MIB)), disk / "epoch-2.pt", on_full="wait",
                          recheck_s=5)  # fmt: skip
    assert out == str(disk / "epoch-2.pt") and len(fake.sleeps) == 3
    assert (disk / "epoch-2.pt").read_bytes() == b"b" * (3 * MIB)
    assert [s for s, _ in channel()] == ["started", "cleared"]
    found = events_since(t0, str(disk))
    assert [k for k, _ in found] == ["save-paused", "save-resumed"]
    assert f"resumed after 15 s waiting for space on {disk}" in found[1][1]
    store = Store(choose().path)
    try:
        ending = Ending("train.py", os.getpid(), time.time(), {"exit": {"code": 0}})
        sentence = explain(store, ending).sentence
    finally:
        store.close()
    assert "it exited normally" in sentence
    assert f"resumed after 15 s waiting for space on {disk}; saved {out}" in sentence


def test_retention_comes_first_and_is_recorded(tmpfs_mount, monkeypatch) -> None:
    disk = tmpfs_mount("8m").path
    t0 = time.time()
    for i in range(1, 6):  # 3 MiB saves, keep=2: the third one on needs room made
        save_checkpoint(writer(b"%d" % i * (3 * MIB)), disk / f"s{i}.pt", keep=2,
                        on_full="wait", fallback=disk / "never")  # fmt: skip
    assert sorted(listing(disk)) == ["s4.pt", "s5.pt"]
    assert not (disk / "never").exists()
    assert "save-room-made" in [k for k, _ in events_since(t0, str(disk))]


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"on_full": "pause"}, ValueError, "on_full must be one of raise, wait"),
        ({"on_full": "wait", "wait_limit_s": 0}, ValueError, "wait_limit_s must be a positive"),
        ({"recheck_s": float("inf")}, ValueError, "recheck_s must be a finite"),
        ({"fallback": 42}, TypeError, "fallback must be a directory path"),
        ({"fallback": ""}, ValueError, "fallback must name a directory"),
        ({"expected_bytes": -1}, ValueError, "expected_bytes must be a whole number"),
    ],
)
def test_bad_settings_are_refused_before_anything(
    tmp_path: Path, kwargs: dict, error: type, needle: str
) -> None:
    with pytest.raises(error, match=needle):
        save_checkpoint(writer(b"x"), tmp_path / "a.pt", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_a_first_save_is_judged_by_the_expected_size(tmpfs_mount) -> None:
    disk = tmpfs_mount("4m").path
    with pytest.raises(CheckpointWontFit, match=r"the save needs about 8\.0 MiB"):
        save_checkpoint(writer(b"x"), disk / "m.pt", expected_bytes=8 * MIB)
    assert listing(disk) == {}


def test_the_space_counted_is_what_the_quota_leaves(loop_ext4) -> None:
    """A project quota of 24 MiB on a 128 MiB disk: two 10 MiB saves fit, the third would
    not (root writes past a quota, a user gets EDQUOT mid-write); refused before writing,
    the quota named."""
    from tests.core.storage.test_quota import (
        PROJECT,
        QUOTA_MKFS,
        _need_kernel_quotas,
        _set_limit,
        _set_project,
    )

    _need_kernel_quotas()
    try:
        m = loop_ext4(size_mb=128, mkfs_args=QUOTA_MKFS)
    except Exception as exc:  # mkfs too old for quotatype=, or the mount refused
        pytest.skip(f"no ext4 with quotas here: {exc}")
    run_dir = m.path / "run"
    run_dir.mkdir()
    _set_project(run_dir, PROJECT)
    _set_limit(m.path, "project", PROJECT, 24 * MIB)
    for i in (1, 2):
        save_checkpoint(writer(b"q" * (10 * MIB)), run_dir / f"m{i}.pt")
    with pytest.raises(CheckpointWontFit, match=f"under project {PROJECT}'s quota on {m.path}"):
        save_checkpoint(writer(b"q" * (10 * MIB)), run_dir / "m3.pt")
    assert sorted(listing(run_dir)) == ["m1.pt", "m2.pt"]


def test_a_disk_that_fills_mid_write_is_waited_out_too(
    tmpfs_mount, channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check said 1 MiB would fit (the last save's size) but the save grew to 4 MiB:
    ENOSPC mid-write, nothing half-written, and with on_full="wait" the save waits for
    room like one refused up front, then lands whole."""
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(b"a" * MIB), disk / "epoch-1.pt")
    (disk / "filler").write_bytes(b"f" * (4 * MIB))

    def someone_frees_space(n: int) -> None:
        if n == 1:
            (disk / "filler").unlink()

    fake = FakeTime(someone_frees_space)
    monkeypatch.setattr(room, "CLOCK", fake.clock)
    monkeypatch.setattr(room, "SLEEP", fake.sleep)
    out = save_checkpoint(writer(b"b" * (4 * MIB)), disk / "epoch-2.pt", on_full="wait")
    assert out == str(disk / "epoch-2.pt") and len(fake.sleeps) == 1
    assert (disk / "epoch-2.pt").read_bytes() == b"b" * (4 * MIB)
    assert sorted(listing(disk)) == ["epoch-1.pt", "epoch-2.pt"]
    assert "filled" in channel()[0][1].message
