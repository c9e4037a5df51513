"""fix.scratch with a real second Unix user (issue 34 item 8): the mirror's local side sat
in a guessable directory under /tmp, made with ``makedirs(exist_ok=True)``; a 0777
directory another user planted there let them read the logs (an API key) and add a file the
mirror copied to the share as root, while it said in sync. Every directory we create or
reuse must be ours alone (core.private), else refused in one line or another name."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.users import other_user, run_as
from trainwatch_lab.fix import scratch
from trainwatch_lab.fix.mirror.files import MirrorFiles
from trainwatch_lab.fix.mirror.mirror import STATUS_FILE, local_mirror

SECRET = "WANDB_API_KEY=0123456789abcdef"


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh directory like /tmp (root's, 1777), that the other user can reach."""
    top = Path(tempfile.mkdtemp(prefix="tw-scratch-", dir="/tmp"))
    top.chmod(0o1777)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def plant(root: Path, share: Path) -> list[Path]:
    """As the other user: 0777 directories at every name a mirror of ``share`` under
    ``root`` has used (``trainwatch-mirror/<name>``, and the per-user one)."""
    user = other_user()
    planted = []
    for base in ("trainwatch-mirror", scratch.base_name()):
        for d in (root / base, root / base / scratch._name_for(str(share))):
            done = run_as(user, "mkdir", "-m", "0777", str(d))
            assert done.returncode == 0, done.stderr
            planted.append(d)
    return planted


def only_ours(path: Path, root: Path) -> None:
    """Every directory from ``root`` (exclusive) down to ``path`` is ours, writable by no one
    else; the other user can neither read a log there nor add a file."""
    d = path
    while d != root:
        st = d.stat()
        assert st.st_uid == os.geteuid() and not st.st_mode & 0o022, (d, oct(st.st_mode))
        d = d.parent
    user = other_user()
    assert run_as(user, "cat", str(path / "wandb.log")).returncode != 0
    assert run_as(user, "touch", str(path / "injected.pt")).returncode != 0


def test_a_root_another_user_planted_in_is_refused_in_one_line(
    shared_tmp: Path, tmp_path: Path
) -> None:
    share = tmp_path / "share" / "exp1"
    plant(shared_tmp, share)
    with pytest.raises(ValueError, match="belongs to another user") as info:
        local_mirror(share, every=60, local_root=shared_tmp)
    assert "\n" not in str(info.value) and str(shared_tmp) in str(info.value)
    assert not share.exists()


def test_a_planted_candidate_is_passed_over_for_a_private_one(
    shared_tmp: Path, tmp_path: Path, tmpfs_mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    share = tmp_path / "share" / "exp1"
    plant(shared_tmp, share)
    small = tmpfs_mount("8m").path  # less room: only chosen when the planted root is refused
    monkeypatch.setattr(scratch, "candidates", lambda: [str(shared_tmp), str(small)])
    with local_mirror(share, every=60) as m:
        assert m.local.startswith(str(small) + "/"), m.local
        (m / "wandb.log").write_text(SECRET + "\n")
        assert m.sync(10)
        only_ours(m.path, small)
    assert sorted(os.listdir(share)) == ["wandb.log"]


def test_a_share_directory_of_ours_others_may_write_gets_another_name(tmp_path: Path) -> None:
    share = tmp_path / "share" / "exp1"
    root = tmp_path / "scratch"
    loose = root / scratch.base_name() / scratch._name_for(str(share))
    loose.mkdir(parents=True)
    loose.chmod(0o777)
    with local_mirror(share, every=60, local_root=root) as m:
        assert m.local == f"{loose}-2"
        assert stat.S_IMODE(os.stat(m.local).st_mode) == 0o700


def test_a_status_file_planted_by_another_user_is_not_listed(shared_tmp: Path) -> None:
    """The panel lists the mirrors from their status files: one another user planted is
    not ours to show (it could claim anything)."""
    user = other_user()
    status = {
        "local": "/tmp/x", "share": "/mnt/share/x", "state": "in-sync", "last_sync": None,
        "lag_s": 0.0, "bytes_pending": 0, "bytes_copied": 0, "files": 1, "pid": 1,
    }  # fmt: skip
    for d in plant(shared_tmp, shared_tmp / "x")[1::2]:
        path = d / STATUS_FILE
        done = run_as(user, "sh", "-c", f"cat > {path}", input=json.dumps(status))
        assert done.returncode == 0, done.stderr
    assert MirrorFiles(roots=[str(shared_tmp)]).look() == []


def test_the_cli_refuses_a_local_directory_others_may_write(tmp_path: Path) -> None:
    local = tmp_path / "runs"
    local.mkdir()
    local.chmod(0o777)
    cmd = [sys.executable, "-m", "trainwatch_lab", "mirror", "--once"]
    done = subprocess.run(
        [*cmd, str(local), str(tmp_path / "share")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "writable by others (mode 777)" in done.stderr
    assert not (tmp_path / "share").exists()
