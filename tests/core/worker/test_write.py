"""The worker's ``write_text`` op through a real helper process: the user's file is replaced
atomically (old or new, never half), and no temporary file is ever left behind."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainwatch_lab.core.guard.guard import MountGuard


@pytest.fixture
def guard() -> Iterator[MountGuard]:
    g = MountGuard(timeout_s=10.0)
    try:
        yield g
    finally:
        g.close()


def test_write_text_replaces_the_file_atomically(guard: MountGuard, tmp_path: Path) -> None:
    target = tmp_path / "history.csv"
    target.write_text("old,contents\n")
    before = os.stat(target).st_ino
    text = "t,a\n" + "".join(f"{i},{i * 2}\n" for i in range(1000)) + "é\n"
    written = guard.call("/", "write_text", path=str(target), text=text)
    assert written == len(text.encode("utf-8"))
    assert target.read_text(encoding="utf-8") == text
    assert os.stat(target).st_ino != before  # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.csv"]  # no temp left
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600


def test_a_failed_write_leaves_no_temp_file(guard: MountGuard, tmp_path: Path) -> None:
    in_the_way = tmp_path / "a-directory"
    (in_the_way / "inside").mkdir(parents=True)
    with pytest.raises(OSError) as err:
        guard.call("/", "write_text", path=str(in_the_way), text="x")
    assert err.value.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory"]
    with pytest.raises(FileNotFoundError):
        guard.call("/", "write_text", path=str(tmp_path / "no" / "such.csv"), text="x")


def test_disk_full_keeps_the_old_file_whole(guard: MountGuard, tmpfs_mount) -> None:
    fs = tmpfs_mount("1m")
    target = fs.path / "history.csv"
    target.write_text("the previous export\n")
    with pytest.raises(OSError) as err:
        guard.call(str(fs.path), "write_text", path=str(target), text="x" * (4 << 20))
    assert err.value.errno == errno.ENOSPC
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in fs.path.iterdir()) == ["history.csv"]
