"""core.private, the one rule for directories we keep files in (the history, the
mirror's local side, staged saves), with a real second user."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.users import other_user, run_as
from trainwatch_lab.core.private import private_dir, untrusted


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="tw-private-", dir="/tmp"))
    top.chmod(0o1777)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_ours_is_made_0700_and_sticky_shared_dirs_pass(tmp_path: Path) -> None:
    assert private_dir(str(tmp_path / "new")) is None
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    # root's and sticky: a place to make a directory of ours (no one replaces an entry of
    # ours), never one to keep files in (others may add theirs: a -wal, a checkpoint)
    assert untrusted("/tmp", only_ours_made_in=True) is None
    assert untrusted("/tmp") == "/tmp is writable by others (mode 1777)"
    (tmp_path / "loose").mkdir(mode=0o775)
    (tmp_path / "loose").chmod(0o775)
    assert (
        untrusted(str(tmp_path / "loose"))
        == f"{tmp_path / 'loose'} is writable by others (mode 775)"
    )


def test_another_users_directory_or_link_is_refused(shared_tmp: Path, tmp_path: Path) -> None:
    user = other_user()
    theirs, link = shared_tmp / "theirs", shared_tmp / "link"
    assert run_as(user, "mkdir", "-m", "0700", str(theirs)).returncode == 0
    assert private_dir(str(theirs)) == f"{theirs} belongs to another user (uid {user.pw_uid})"
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    # a link of theirs onto a directory of ours: they may point it elsewhere after our look
    assert run_as(user, "ln", "-s", str(ours), str(link)).returncode == 0
    why = untrusted(str(link))
    assert why == f"{link} is a symbolic link another user owns (uid {user.pw_uid})"
