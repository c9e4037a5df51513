"""The history's place: never on a network or FUSE mount (SQLite's locking is unsafe there),
judged by our mount classification without touching the candidate."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import need_root
from tests.support.users import other_user, run_as
from trainwatch_lab.core.record import choose
from trainwatch_lab.core.record.location import STORE_ENV

from .scenarios import CLI, ENV


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(STORE_ENV, raising=False)
    return monkeypatch


def test_a_state_directory_on_sshfs_is_passed_over_with_a_note(sshfs_mount, clean_env) -> None:
    where = choose(explicit_dir=str(sshfs_mount.path / "state"))
    assert not where.path.startswith(str(sshfs_mount.mountpoint))
    assert where.path.endswith(".sqlite")
    assert any("fuse.sshfs" in n and "unsafe" in n for n in where.notes), where.notes


def test_an_explicit_file_on_sshfs_is_refused_never_moved_elsewhere(sshfs_mount, clean_env) -> None:
    """``--store`` names one file: refused, it is an error, never a write to another place
    (issue 35, item 10: it fell back to the machine's shared store)."""
    wanted = sshfs_mount.path / "history.sqlite"
    with pytest.raises(LookupError, match=r"fuse\.sshfs.*unsafe"):
        choose(explicit_file=str(wanted))
    sshfs_mount.pause()  # a dead share: choosing must not touch it
    try:
        with pytest.raises(LookupError, match=r"fuse\.sshfs"):
            choose(explicit_file=str(wanted))
    finally:
        sshfs_mount.resume()


def _answer(share, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv``'s answer; one that waits on the hung share fails the test (the share is
    resumed first, so that the process can die)."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        share.resume()
        proc.kill()
        proc.communicate()
        pytest.fail(f"{argv[3:5]} waited on the hung share")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_a_store_through_a_symlink_onto_a_hung_share_is_refused_without_touching_it(
    sshfs_mount, clean_env, tmp_path: Path
) -> None:
    """A local symlink onto sshfs is judged by the share; with the share hung, ``run``,
    ``history`` and ``choose`` answer at once (issue 35, item 8: ``run`` sat in D state in
    ``os.makedirs`` for 30 min before the command even started)."""
    (sshfs_mount.path / "state").mkdir()
    link = tmp_path / "state"
    link.symlink_to(sshfs_mount.path / "state")
    sshfs_mount.pause()
    try:
        where = choose(explicit_dir=str(link))  # passed over, with a note
        assert not where.path.startswith(str(link)), where
        assert any("fuse.sshfs" in n for n in where.notes), where.notes
        for args in (
            ["run", "--store", str(link / "h.sqlite"), "--", "true"],
            ["history", "events", "--store", str(link / "h.sqlite")],
        ):
            done = _answer(sshfs_mount, [*CLI, *args])
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done
            assert "fuse.sshfs" in done.stderr and "unsafe" in done.stderr, done.stderr
        # $TRAINWATCH_STORE there: passed over with a note, never touched
        clean_env.setenv(STORE_ENV, str(link / "h.sqlite"))
        where = choose()
        assert not where.path.startswith(str(link)), where
        assert any(STORE_ENV in n and "fuse.sshfs" in n for n in where.notes), where.notes
    finally:
        sshfs_mount.resume()


def test_an_explicit_store_that_is_refused_runs_nothing_and_writes_nowhere(
    tmp_path: Path, clean_env
) -> None:
    """One line, exit 2; the command does not run and no other history is written."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    marker = tmp_path / "ran"
    env = {**ENV, "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run(
        [*CLI, "run", "--store", str(shared / "h.sqlite"), "--", "touch", str(marker)],
        capture_output=True,
        text=True,
        env={k: v for k, v in env.items() if k != STORE_ENV},
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert "writable by others" in done.stderr
    assert not marker.exists() and not (tmp_path / "state").exists()
    assert list(shared.iterdir()) == []


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


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory under /tmp that another user can reach (pytest's tmp_path is 0700)."""
    top = Path(tempfile.mkdtemp(prefix="tw-location-", dir="/tmp"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_a_directory_another_user_controls_on_the_way_is_refused(open_tmp: Path, clean_env) -> None:
    """Root records nowhere a path another user can redirect: a symlink in their directory
    is followed by nothing, whatever it points to now (issue 35, item 9: ``untrusted()``
    used ``os.stat``, which follows the link, and judged its target)."""
    from trainwatch_lab.core.record import Store, StoreError

    user = other_user()
    mine = open_tmp / "mine"
    mine.mkdir(mode=0o700)
    theirs = open_tmp / "theirs"
    theirs.mkdir()
    os.chown(theirs, user.pw_uid, user.pw_gid)
    assert run_as(user, "ln", "-s", str(mine), str(theirs / "state")).returncode == 0
    wanted = theirs / "state" / "h.sqlite"
    with pytest.raises(LookupError, match="another user may change"):
        choose(explicit_file=str(wanted))
    with pytest.raises(StoreError, match="another user may change"):
        Store(str(wanted), role="t")
    assert list(mine.iterdir()) == []


def test_a_wal_another_user_planted_as_a_symlink_is_never_followed(
    open_tmp: Path, clean_env
) -> None:
    """In a directory others may write (sticky, like /tmp) another user plants the store's
    ``-wal`` as a symlink to a file of root's: recording there is refused and the file's
    mode stays (issue 35, item 9: ``os.chmod`` followed the link and made it 0600)."""
    from trainwatch_lab.core.record import Store, StoreError

    user = other_user()
    victim = open_tmp / "victim.conf"
    victim.write_text("root's\n")
    victim.chmod(0o644)
    shared = open_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert run_as(user, "ln", "-s", str(victim), str(shared / "h.sqlite-wal")).returncode == 0
    assert run_as(user, "ln", "-s", str(victim), str(shared / "h.sqlite-shm")).returncode == 0
    with pytest.raises(StoreError, match="refusing"):
        store = Store(str(shared / "h.sqlite"), role="t")
        store.register()
        store.close()
    assert victim.stat().st_mode & 0o777 == 0o644
    assert victim.read_text() == "root's\n"


def test_a_symlink_we_own_in_place_of_the_wal_is_refused_not_followed(tmp_path: Path) -> None:
    """The -wal and -shm are opened with O_NOFOLLOW: a link there is refused, not chmod'ed
    through (its target keeps its mode)."""
    from trainwatch_lab.core.record import Store, StoreError

    target = tmp_path / "elsewhere"
    target.write_text("x")
    target.chmod(0o644)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "h.sqlite-shm").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        Store(str(state / "h.sqlite"), role="t")
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_directory_of_our_own_group_on_the_way_is_taken(tmp_path: Path, clean_env) -> None:
    """umask 002 (a user's private group) makes ``~/.local`` 0775: still ours, taken."""
    local = tmp_path / "home" / ".local"
    local.mkdir(parents=True)
    local.chmod(0o775)
    os.chown(local, os.getuid(), os.getegid())
    wanted = local / "state" / "h.sqlite"
    assert choose(explicit_file=str(wanted)).path == str(wanted)
