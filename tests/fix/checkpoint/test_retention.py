"""``fix.checkpoint.retention``: keep=N for saves a framework writes itself, on a real tmpfs
through the real mount guard. It removes only the series' own saves beyond ``keep``, oldest
first, never the newest, a spared one, one written before ``since`` or a name outside the
series, and nothing at all when that would not make the room."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tests.support.full_disk import MIB, fill_to, recorded_kinds
from trainwatch_lab.fix.checkpoint.retention import (
    Series,
    make_room,
    name_pattern,
    pattern_order,
    step_of,
)


def saves_on_tmpfs(tmpfs_mount, n: int = 4) -> Path:
    """``checkpoint-1`` .. ``checkpoint-n`` (1 MiB each), a file outside the series, and
    half a save of room left."""
    d = tmpfs_mount("16m").path / "out"
    d.mkdir()
    for step in range(1, n + 1):
        (d / f"checkpoint-{step}").mkdir()
        (d / f"checkpoint-{step}" / "model.bin").write_bytes(b"w" * MIB)
    (d / "checkpoint-notes.txt").write_bytes(b"n" * MIB)  # not the Trainer's name
    fill_to(d.parent, MIB // 2)
    return d


def left(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def trainer(d: Path, **kw) -> Series:
    return Series(str(d), r"checkpoint-\d+", step_of, **kw)


def test_it_removes_the_oldest_beyond_keep_never_the_newest(tmpfs_mount) -> None:
    d = saves_on_tmpfs(tmpfs_mount)
    t0 = time.time()
    assert make_room(trainer(d), 2, "checkpoint-5", MIB)
    assert left(d) == ["checkpoint-4", "checkpoint-notes.txt"]  # 4 and the new one make 2
    assert recorded_kinds(t0, d) == ["save-room-made"]


def test_keep_counts_the_saves_it_keeps(tmpfs_mount) -> None:
    d = saves_on_tmpfs(tmpfs_mount)
    assert make_room(trainer(d), 3, "checkpoint-5", MIB)
    assert left(d) == ["checkpoint-3", "checkpoint-4", "checkpoint-notes.txt"]


def test_a_spared_save_and_one_from_before_stay(tmpfs_mount) -> None:
    d = saves_on_tmpfs(tmpfs_mount)
    old = time.time() - 3600
    os.utime(d / "checkpoint-2", (old, old))  # written before this run
    series = trainer(d, since=time.time() - 60, spare=lambda: ["checkpoint-1"])
    assert make_room(series, 1, "checkpoint-5", MIB)
    assert left(d) == ["checkpoint-1", "checkpoint-2", "checkpoint-4", "checkpoint-notes.txt"]


def test_nothing_is_removed_when_it_would_not_be_enough(tmpfs_mount) -> None:
    d = saves_on_tmpfs(tmpfs_mount)
    t0 = time.time()
    assert not make_room(trainer(d), 1, "checkpoint-5", 6 * MIB)
    assert len(left(d)) == 5 and recorded_kinds(t0, d) == []


def test_room_enough_already_removes_nothing(tmpfs_mount) -> None:
    d = saves_on_tmpfs(tmpfs_mount)
    assert make_room(trainer(d), 1, "checkpoint-5", MIB // 4)
    assert len(left(d)) == 5


def test_keras_names_by_the_fits_own_numbers_not_by_mtime(tmpfs_mount) -> None:
    """keep=N removed by mtime: after a clock stepped back, the real newest save looked
    oldest and went first (issue 34 item 9, the Keras callback's side)."""
    pattern = name_pattern("/ckpt/model_{epoch:02d}-{val_loss:.2f}.keras")
    assert re.fullmatch(pattern, "model_03-0.12.keras")
    assert not re.fullmatch(pattern, "model.keras") and not re.fullmatch(pattern, "x_03-1.keras")
    d = tmpfs_mount("16m").path
    stepped = {"model_08-0.90.keras": 5000.0, "model_09-0.50.keras": 1000.0}  # clock back
    stepped["model_10-0.40.keras"] = 1001.0
    for name, mtime in stepped.items():
        (d / name).write_bytes(b"k" * MIB)
        os.utime(d / name, (mtime, mtime))
    fill_to(d, MIB // 2)
    assert make_room(Series(str(d), pattern, pattern_order(pattern)), 2, "next", MIB)
    # epoch 10 is the newest whatever the clock said: it and the next make 2
    assert [p.name for p in d.glob("*.keras")] == ["model_10-0.40.keras"]


def test_keras_names_without_numbers_go_by_when_they_were_written() -> None:
    order = pattern_order(name_pattern("/ckpt/best-{val_loss:.3f}.keras"))
    saves = [["best-0.200.keras", MIB, 20.0], ["best-0.100.keras", MIB, 30.0]]
    assert [s[0] for s in sorted(saves, key=order)] == ["best-0.200.keras", "best-0.100.keras"]
    batches = pattern_order(name_pattern("/ckpt/m-{epoch}-{batch}.weights.h5"))
    saves = [["m-2-100.weights.h5", MIB, 1.0], ["m-1-900.weights.h5", MIB, 2.0]]
    assert [s[0] for s in sorted(saves, key=batches)] == [
        "m-1-900.weights.h5",
        "m-2-100.weights.h5",
    ]
