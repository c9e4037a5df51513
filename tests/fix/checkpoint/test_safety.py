"""save_checkpoint never loses a user's file (issue 25): retention limited to its own saves, a
directory checkpoint that cannot vanish when the helper is SIGKILLed mid-commit, a save
stuck on a paused sshfs share that holds neither the training loop nor exit, and links
planted where the save writes. Real files, real child processes, a real sshfs share."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.mounts import SshfsMount, child_on_paused_share, wait_until
from trainwatch_lab.core.guard.guard import MountGuard, MountUnresponsive
from trainwatch_lab.fix.checkpoint.partial import COMMIT_BYTES_PER_S, PARTIAL, host_tag
from trainwatch_lab.fix.checkpoint.save import save_checkpoint

REPO = Path(__file__).resolve().parents[3]
MIB = 1024 * 1024


def writer(data: bytes) -> Callable[[str], None]:
    def save(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(data)

    return save


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def test_keep_removes_only_the_saves_it_wrote(tmp_path: Path) -> None:
    """Finding 4: another model's save, the user's own file of the same name shape, and an
    earlier run's saves (dates are digits too) are never removed by ``keep``."""
    theirs = {
        "resnet18-epoch90.pt": b"another model",
        "resnet50-epoch0.pt": b"the user's own",
        "run-2024-05-31-step100.pt": b"yesterday 100",
        "run-2024-05-31-step200.pt": b"yesterday 200",
    }
    for name, data in theirs.items():
        (tmp_path / name).write_bytes(data)
    for e in range(1, 5):
        save_checkpoint(writer(b"e%d" % e), tmp_path / f"resnet50-epoch{e}.pt", keep=2)
        time.sleep(0.01)  # distinct modification times
    for step in (300, 400):
        save_checkpoint(writer(b"s"), tmp_path / f"run-2024-06-01-step{step}.pt", keep=1)
        time.sleep(0.01)
    for name, data in theirs.items():
        assert (tmp_path / name).read_bytes() == data, name
    saves = {n for n in names(tmp_path) if n not in theirs and not n.startswith(".")}
    assert saves == {"resnet50-epoch3.pt", "resnet50-epoch4.pt", "run-2024-06-01-step400.pt"}


def test_an_explicit_series_keeps_two_models_apart(tmp_path: Path) -> None:
    """Two series this saver wrote into one directory whose names differ only in digits:
    ``series=`` says which is which."""
    for e in range(1, 4):
        for model in ("resnet18", "resnet50"):
            name = f"{model}-epoch{e}.pt"
            save_checkpoint(writer(b"x"), tmp_path / name, keep=1, series=f"{model}-epoch*.pt")
        time.sleep(0.01)
    assert {n for n in names(tmp_path) if not n.startswith(".")} == {
        "resnet18-epoch3.pt",
        "resnet50-epoch3.pt",
    }
    with pytest.raises(ValueError, match="is not in the series"):
        save_checkpoint(writer(b"x"), tmp_path / "other.pt", series="resnet*.pt")


def test_a_full_disk_makes_room_only_from_its_own_saves(tmpfs_mount) -> None:
    """Finding 4 on a full tmpfs: the user's file of the series is not what makes room."""
    disk = tmpfs_mount("8m").path
    (disk / "epoch-0.pt").write_bytes(b"u" * (3 * MIB))  # the user's, not the saver's
    save_checkpoint(writer(b"a" * (2 * MIB)), disk / "epoch-1.pt", keep=1)
    time.sleep(0.01)
    save_checkpoint(writer(b"b" * (2 * MIB)), disk / "epoch-2.pt", keep=1)
    assert (disk / "epoch-0.pt").read_bytes() == b"u" * (3 * MIB)
    assert {n for n in names(disk) if not n.startswith(".")} == {"epoch-0.pt", "epoch-2.pt"}


def save_dir(tag: bytes) -> Callable[[str], None]:
    def save(path: str) -> None:
        os.mkdir(path)
        for part in ("weights", "optimizer"):
            with open(os.path.join(path, part), "wb") as fh:
                fh.write(tag * 1000)

    return save


def test_a_leftover_old_checkpoint_is_put_back_not_deleted(tmp_path: Path) -> None:
    """Finding 6, as the earlier versions left it: the helper SIGKILLed between its two
    renames leaves ``checkpoint-best`` gone and the old one hidden as ``...-<name>.old``;
    the next save, even one that fails, must put it back, and its note must not claim
    what it did not check."""
    old = tmp_path / f"{PARTIAL}{host_tag()}-{dead_pid()}-0123abcd-checkpoint-best.old"
    save_dir(b"o")(str(old))

    def broken(path: str) -> None:
        raise RuntimeError("CUDA error: out of memory")

    with pytest.raises(RuntimeError, match="out of memory") as info:
        save_checkpoint(broken, tmp_path / "checkpoint-best")
    assert names(tmp_path) - {".trainwatch-saves.json"} == {"checkpoint-best"}
    assert (tmp_path / "checkpoint-best" / "weights").read_bytes() == b"o" * 1000
    if sys.version_info >= (3, 11):
        notes = " ".join(info.value.__notes__)
        assert "checkpoint-best was left as it was; nothing partial remains" in notes, notes


KILLED = textwrap.dedent(
    """
    import os, sys
    from trainwatch_lab.fix import save_checkpoint

    def save_dir(tag):
        def save(path):
            os.mkdir(path)
            for part in ("weights", "optimizer"):
                with open(os.path.join(path, part), "wb") as fh:
                    fh.write(tag * 1000)
        return save

    target = os.path.join(sys.argv[1], "checkpoint-best")
    save_checkpoint(save_dir(b"1"), target)
    try:
        save_checkpoint(save_dir(b"2"), target)
    except Exception as exc:
        print("second failed:", " ".join(getattr(exc, "__notes__", [])), flush=True)
    else:
        print("second landed", flush=True)
    print("names:", sorted(os.listdir(sys.argv[1])), flush=True)
    save_checkpoint(save_dir(b"3"), target)
    """
)


@pytest.mark.parametrize("point", ["commit-between-renames", "commit-before-removing-old"])
def test_a_directory_checkpoint_survives_the_helper_killed_mid_commit(
    sshfs_mount: SshfsMount, tmp_path: Path, point: str
) -> None:
    """Finding 6 for real: the guard's helper SIGKILLs itself at the named point of the
    commit (``TRAINWATCH_CRASH_AT``). On sshfs there is no atomic swap, so the two renames
    are done apart; the name must hold a whole checkpoint at every moment after, and the
    next save lands."""
    share = sshfs_mount.path / point
    env = {**os.environ, "TRAINWATCH_CRASH_AT": f"{point}@{tmp_path / 'fired'}"}
    proc = subprocess.run([sys.executable, "-c", KILLED, str(share)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fired").exists(), "the helper never reached the crash point"
    lines = proc.stdout.splitlines()
    if point == "commit-between-renames":
        assert lines[0].startswith("second failed:"), proc.stdout
        assert "checkpoint-best was put back from the earlier save" in lines[0], proc.stdout
        assert "nothing partial remains" in lines[0], proc.stdout
    assert re.fullmatch(r"names: \['\.trainwatch-saves\.json', 'checkpoint-best'\]", lines[1])
    assert sorted(names(share)) == [".trainwatch-saves.json", "checkpoint-best"]
    for part in ("weights", "optimizer"):
        assert (share / "checkpoint-best" / part).read_bytes() == b"3" * 1000


def test_the_saver_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """Finding 8 for the saver: the save writes into a directory created for it (0700,
    exclusively), so a link planted at any name beside the checkpoint is never written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious.pt"
    target.write_bytes(b"not yours")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for n in range(64):  # every name an attacker could guess from the old scheme's prefix
        (ckpt / f"{PARTIAL}{host_tag()}-{os.getpid()}-{n:08x}-model.pt").symlink_to(target)
    seen: list[str] = []

    def save(path: str) -> None:
        seen.append(path)
        writer(b"model")(path)

    save_checkpoint(save, ckpt / "model.pt")
    parent = os.path.dirname(seen[0])
    assert os.path.basename(parent).startswith(PARTIAL) and not os.path.islink(parent)
    assert target.read_bytes() == b"not yours"
    assert (ckpt / "model.pt").read_bytes() == b"model" and not (ckpt / "model.pt").is_symlink()


HUNG = textwrap.dedent(
    """
    import dataclasses, os, sys, time
    import trainwatch_lab.core.defaults as d
    d.DEFAULTS = dataclasses.replace(d.DEFAULTS, save_busy_wait_s=2.0, save_exit_wait_s=2.0)
    from trainwatch_lab.fix import save_checkpoint

    def slow(path):
        with open(path, "wb") as fh:
            fh.write(b"x" * 65536)
            fh.flush()
            print("writing", flush=True)
            sys.stdin.readline()  # the share is paused now
            for _ in range(100):
                fh.write(b"x" * 65536)
                fh.flush()
                os.fsync(fh.fileno())

    first = save_checkpoint(slow, sys.argv[1] + "/a.pt", background=True)
    t0 = time.monotonic()
    second = save_checkpoint(lambda p: open(p, "wb").write(b"b"), sys.argv[1] + "/b.pt",
                             background=True)
    print(f"second returned {time.monotonic() - t0:.1f} done={second.done()}", flush=True)
    print(f"step goes on {type(second.error).__name__}", flush=True)
    """
)


def test_a_save_stuck_on_a_paused_share_holds_neither_training_nor_exit(
    sshfs_mount: SshfsMount,
) -> None:
    """Finding 3: the share stops answering mid-save and stays stopped; the next background
    save returns after the bound (skipped, one line) and the script ends after its own
    bound, while the share is still paused."""
    share = sshfs_mount.path / "hung"
    share.mkdir()
    with child_on_paused_share(sshfs_mount, HUNG, share, ready="writing") as proc:
        out, err = proc.communicate(timeout=60)  # the bounds are 2 s each: 15x margin
    assert proc.returncode == 0, err
    assert re.search(r"second returned \d+\.\d done=True", out), out
    assert "step goes on SaveSkipped" in out, out
    skipped = [line for line in err.splitlines() if "b.pt not saved" in line]
    assert len(skipped) == 1 and "a.pt is still in flight" in skipped[0], err
    assert "exiting without the save to" in err and "a.pt" in err, err
    assert wait_until(lambda: not (share / "a.pt").exists(), 1)  # never half a save


def test_a_save_to_a_paused_share_raises_an_oserror(sshfs_mount: SshfsMount) -> None:
    """``except OSError`` around a save catches a share that stopped answering too."""
    share = sshfs_mount.path / "paused"
    share.mkdir()
    sshfs_mount.pause()
    try:
        with pytest.raises(OSError) as info:
            save_checkpoint(writer(b"x"), share / "m.pt")
    finally:
        sshfs_mount.resume()
    assert isinstance(info.value, MountUnresponsive) and info.value.errno == errno.ETIMEDOUT
    assert not (share / "m.pt").exists()


class TimeoutsSeen(MountGuard):
    """The real guard, noting the timeout each operation was given (the commit's is what
    decides whether a slow but healthy fsync is killed as unresponsive)."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: dict[str, float | None] = {}

    def call(self, key: str, op: str, *args: object, **kwargs: object) -> object:
        self.timeouts[op] = kwargs.get("timeout")  # type: ignore[assignment]
        return super().call(key, op, *args, **kwargs)


def test_a_first_big_save_gets_time_to_commit_for_the_bytes_it_wrote(tmp_path: Path) -> None:
    """Review 3: the first save of a series (no earlier one to size it by) writes 40 GiB
    (sparse: no disk used); its commit is given time for those bytes, not the 30 s base
    that SIGKILLed a healthy fsync of a first big save."""
    size = 40 * 1024 * MIB

    def save(path: str) -> None:
        with open(path, "wb") as fh:
            fh.truncate(size)

    guard = TimeoutsSeen()
    try:
        save_checkpoint(save, tmp_path / "epoch-1.pt", guard=guard)
    finally:
        guard.close()
    assert (tmp_path / "epoch-1.pt").stat().st_size == size
    assert (guard.timeouts["commit"] or 0) >= size / COMMIT_BYTES_PER_S


def _step_back(path: Path, seconds: float = 3600.0) -> None:
    """The clock stepped back (NTP, a VM restored) while ``path`` was saved: its mtime lies
    before the saves made earlier."""
    st = path.stat()
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def test_keep_orders_saves_by_their_own_sequence_not_mtime(tmp_path: Path) -> None:
    """Issue 34 item 9: after a clock step back, keep=3 kept epoch-003, epoch-004 and
    epoch-008; the newest three by the saver's own count are 006, 007, 008."""
    for e in range(1, 9):
        path = tmp_path / f"epoch-{e:03d}.pt"
        save_checkpoint(writer(b"e%d" % e), path, keep=3)
        if e >= 5:
            _step_back(path)
    saves = {n for n in names(tmp_path) if not n.startswith(".")}
    assert saves == {"epoch-006.pt", "epoch-007.pt", "epoch-008.pt"}


def test_making_room_never_removes_the_real_newest_after_a_clock_step(tmpfs_mount) -> None:
    """Issue 34 item 9: the save with the oldest mtime is the real newest after a step back;
    room is made from the oldest by sequence (s1), and the real newest (s2) stays."""
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(b"a" * (2 * MIB)), disk / "s1.pt", keep=2)
    save_checkpoint(writer(b"b" * (2 * MIB)), disk / "s2.pt", keep=2)
    _step_back(disk / "s2.pt")
    (disk / "filler").write_bytes(b"f" * (3 * MIB))  # room for no third 2 MiB save
    save_checkpoint(writer(b"c" * (2 * MIB)), disk / "s3.pt", keep=2)
    assert {n for n in names(disk) if not n.startswith(".")} == {"filler", "s2.pt", "s3.pt"}
    assert (disk / "s2.pt").read_bytes() == b"b" * (2 * MIB)
