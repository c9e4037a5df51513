"""core.atomic_write: the one way every writer replaces a file (old or new, never half)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from trainwatch_lab.core.atomic_write import temporary_name, write_atomically


def test_replaces_the_file_with_the_mode_asked(tmp_path: Path) -> None:
    shared, ours = tmp_path / "targets.json", tmp_path / ".ours.json"
    shared.write_text("old")
    old_umask = os.umask(0o022)
    try:
        assert write_atomically(str(shared), b"new") == 3
        write_atomically(str(ours), b"{}", mode=0o600, durable=False)
    finally:
        os.umask(old_umask)
    assert shared.read_text() == "new" and ours.read_text() == "{}"
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    assert stat.S_IMODE(ours.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ours.json", "targets.json"]


def test_a_hidden_files_temporary_name_keeps_its_prefix(tmp_path: Path) -> None:
    """The mirror skips names starting with its prefix: a temporary file a SIGKILL left
    behind must start with it too, or the next round copies it to the share."""
    hidden = os.path.basename(temporary_name(str(tmp_path / ".trainwatch-mirror.json")))
    plain = os.path.basename(temporary_name(str(tmp_path / "export.csv")))
    assert hidden.startswith(".trainwatch-mirror.json.") and hidden.endswith(".tmp")
    assert plain.startswith(".export.csv.")


def test_a_failed_replace_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "is-a-directory"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_atomically(str(target), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is-a-directory"]
    assert [p.name for p in target.iterdir()] == ["inside"]


@pytest.mark.root
def test_a_full_disk_leaves_the_old_file_whole(tmpfs_mount) -> None:
    disk = tmpfs_mount("1m")
    target = Path(disk.path) / "status.json"
    target.write_text("old")
    with pytest.raises(OSError) as raised:
        write_atomically(str(target), bytes(2 << 20))
    assert raised.value.errno == errno.ENOSPC
    assert target.read_text() == "old"
    assert [p.name for p in Path(disk.path).iterdir()] == ["status.json"]
