"""The history's place: never on a network or FUSE mount (SQLite's locking is unsafe there),
judged by our mount classification without touching the candidate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainwatch_lab.core.record import choose
from trainwatch_lab.core.record.location import STORE_ENV


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(STORE_ENV, raising=False)
    return monkeypatch


def test_a_state_directory_on_sshfs_is_passed_over_with_a_note(sshfs_mount, clean_env) -> None:
    where = choose(explicit_dir=str(sshfs_mount.path / "state"))
    assert not where.path.startswith(str(sshfs_mount.mountpoint))
    assert where.path.endswith(".sqlite")
    assert any("fuse.sshfs" in n and "unsafe" in n for n in where.notes), where.notes


def test_an_explicit_file_on_sshfs_is_refused_for_a_local_one(sshfs_mount, clean_env) -> None:
    wanted = sshfs_mount.path / "history.sqlite"
    where = choose(explicit_file=str(wanted))
    assert where.path != str(wanted) and where.notes
    sshfs_mount.pause()  # a dead share: choosing must not touch it
    try:
        again = choose(explicit_file=str(wanted))
    finally:
        sshfs_mount.resume()
    assert again.path == where.path


def test_a_local_file_is_taken_as_given(tmp_path: Path, clean_env) -> None:
    wanted = tmp_path / "h.sqlite"
    assert choose(explicit_file=str(wanted)).path == str(wanted)
    clean_env.setenv(STORE_ENV, str(tmp_path / "env.sqlite"))
    assert choose().path == str(tmp_path / "env.sqlite")
    assert choose().notes == ()
    assert os.listdir(tmp_path) == []  # choosing creates nothing
