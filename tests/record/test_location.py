"""The history's place: never on a network or FUSE mount (SQLite's locking is unsafe there),
judged by our mount classification without touching the candidate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.env import need_root
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


NOBODY = 65534


def test_a_directory_another_user_owns_is_passed_over_and_refused(
    tmp_path: Path, clean_env
) -> None:
    """A co-tenant who pre-creates the fallback directory 0777 must not read the history."""
    from trainwatch_lab.core.record import Store, StoreError

    need_root("needs root to give a directory to another user")

    theirs = tmp_path / "trainwatch-lab-0"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    theirs.chmod(0o777)
    where = choose(explicit_dir=str(theirs))
    assert not where.path.startswith(str(theirs)), where
    assert any("belongs to another user" in n for n in where.notes), where.notes
    with pytest.raises(StoreError, match="belongs to another user"):
        Store(str(theirs / "h.sqlite"), role="t")
    assert list(theirs.iterdir()) == []  # nothing written there


def test_our_directory_writable_by_others_is_refused(tmp_path: Path, clean_env) -> None:
    from trainwatch_lab.core.record import Store, StoreError

    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    assert any("writable by others" in n for n in choose(explicit_dir=str(loose)).notes)
    with pytest.raises(StoreError, match="writable by others"):
        Store(str(loose / "h.sqlite"), role="t")


def test_the_history_s_files_are_private(tmp_path: Path, clean_env) -> None:
    from trainwatch_lab.core.record import Event, Store

    old = os.umask(0o022)
    try:
        store = Store(str(tmp_path / "state" / "h.sqlite"), role="t")
        store.register()
        store.add_events([Event(1.0, "run-started", "x", "x --token=secret")])
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "state").iterdir()}
    store.close()
    assert modes == {"h.sqlite": 0o600, "h.sqlite-wal": 0o600, "h.sqlite-shm": 0o600}, modes
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
