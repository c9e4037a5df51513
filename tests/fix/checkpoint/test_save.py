"""fix.save_checkpoint on real filesystems: a small tmpfs that fills, Ctrl-C in a real child
process, and bad input that must change nothing."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.identity import process_home
from trainwatch_lab.fix.checkpoint.manifest import MANIFEST
from trainwatch_lab.fix.checkpoint.partial import PARTIAL, host_tag
from trainwatch_lab.fix.checkpoint.save import directory_of_pattern, save_checkpoint, series_pattern
from trainwatch_lab.fix.space import CheckpointWontFit, SpaceWatch

REPO = Path(__file__).resolve().parents[3]
MIB = 1024 * 1024


def writer(size: int, fill: bytes = b"x") -> Callable[[str], None]:
    def save(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(fill * size)

    return save


def listing(directory: Path) -> dict[str, int]:
    """Every entry, hidden ones included, with its size: 'nothing changed' is this equal
    (the saver's manifest aside, test_safety.py looks at it)."""
    if not directory.exists():
        return {}
    return {p.name: p.stat().st_size for p in directory.iterdir() if p.name != MANIFEST}


def test_saves_land_whole_and_keep_the_newest(tmp_path: Path) -> None:
    for i in range(5):
        out = save_checkpoint(writer(1000 + i), tmp_path / f"epoch-{i:03d}.pt", keep=2)
        assert out == str(tmp_path / f"epoch-{i:03d}.pt")
        time.sleep(0.01)  # distinct modification times
    assert listing(tmp_path) == {"epoch-003.pt": 1003, "epoch-004.pt": 1004}


def test_the_same_name_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "last.pt"
    save_checkpoint(writer(10, b"a"), target)
    save_checkpoint(writer(20, b"b"), target, keep=1)
    assert target.read_bytes() == b"b" * 20
    assert listing(tmp_path) == {"last.pt": 20}


def test_a_directory_save_replaces_the_older_directory_whole(tmp_path: Path) -> None:
    def save_dir(content: bytes) -> Callable[[str], None]:
        def save(path: str) -> None:  # save_pretrained: a directory of files
            os.mkdir(path)
            Path(path, "model.safetensors").write_bytes(content)
            Path(path, "config.json").write_text("{}")

        return save

    save_checkpoint(save_dir(b"old"), tmp_path / "checkpoint-1")
    save_checkpoint(save_dir(b"new"), tmp_path / "checkpoint-1")
    assert (tmp_path / "checkpoint-1" / "model.safetensors").read_bytes() == b"new"
    time.sleep(0.01)
    save_checkpoint(save_dir(b"two"), tmp_path / "checkpoint-2", keep=1)
    assert sorted(listing(tmp_path)) == ["checkpoint-2"]


def test_a_save_that_will_not_fit_is_refused_before_writing(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(3 * MIB), disk / "ckpt" / "epoch-1.pt")
    save_checkpoint(writer(3 * MIB), disk / "ckpt" / "epoch-2.pt")
    before = listing(disk / "ckpt")
    called = []
    with pytest.raises(CheckpointWontFit) as info:
        save_checkpoint(lambda p: called.append(p), disk / "ckpt" / "epoch-3.pt")
    assert called == []  # refused before the save ran
    assert info.value.errno == errno.ENOSPC
    assert "epoch-3.pt will not fit" in str(info.value) and "3.0 MiB" in str(info.value)
    assert "Nothing was written" in str(info.value)
    assert listing(disk / "ckpt") == before


def test_keep_makes_room_from_the_saves_it_would_remove_anyway(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    for i in range(1, 5):
        save_checkpoint(writer(3 * MIB), disk / f"s{i}.pt", keep=2)
        time.sleep(0.01)
    assert sorted(listing(disk)) == ["s3.pt", "s4.pt"]


def test_a_disk_that_fills_mid_write_leaves_no_partial_file(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    save_checkpoint(writer(MIB, b"g"), disk / "step-1.pt")
    before = listing(disk)
    free = os.statvfs(disk).f_bavail

    def too_big(path: str) -> None:  # the last save said 1 MiB: this one writes 64
        with open(path, "wb") as fh:
            for _ in range(64):
                fh.write(b"x" * MIB)
                fh.flush()

    with pytest.raises(OSError) as info:
        save_checkpoint(too_big, disk / "step-2.pt")
    assert info.value.errno == errno.ENOSPC
    assert listing(disk) == before
    assert (disk / "step-1.pt").read_bytes() == b"g" * MIB
    assert os.statvfs(disk).f_bavail == free  # the partial file's blocks are back


def test_an_exception_in_save_changes_nothing(tmp_path: Path) -> None:
    save_checkpoint(writer(5), tmp_path / "model.pt")
    before = listing(tmp_path)

    def broken(path: str) -> None:
        Path(path).write_bytes(b"half")
        raise RuntimeError("CUDA error: out of memory")

    with pytest.raises(RuntimeError, match="out of memory") as info:
        save_checkpoint(broken, tmp_path / "model.pt")
    assert listing(tmp_path) == before
    if sys.version_info >= (3, 11):
        assert "was left as it was" in " ".join(info.value.__notes__)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C inside save, raised in this thread
        save_checkpoint(
            lambda p: (Path(p).write_bytes(b"x"), signal.raise_signal(signal.SIGINT)),
            tmp_path / "model.pt",
        )
    assert listing(tmp_path) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"keep": 0}, ValueError, "keep must be a whole number of saves, at least 1"),
        ({"keep": -3}, ValueError, "keep must be"),
        ({"keep": 1.5}, ValueError, "keep must be"),
        ({"keep": True}, ValueError, "keep must be"),
        ({"save": "torch.save"}, TypeError, "save must be a callable"),
        ({"path": 42}, TypeError, "path must be a str or os.PathLike"),
        ({"path": ""}, ValueError, "path must name a file"),
    ],
)
def test_bad_arguments_are_refused_before_anything(
    tmp_path: Path, kwargs: dict, error: type, needle: str
) -> None:
    save_checkpoint(writer(5), tmp_path / "a1.pt")
    before = listing(tmp_path)
    args = {"save": writer(5), "path": tmp_path / "a2.pt", **kwargs}
    with pytest.raises(error, match=needle):
        save_checkpoint(args.pop("save"), args.pop("path"), **args)
    assert listing(tmp_path) == before


def test_a_path_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a directory")
    with pytest.raises(NotADirectoryError, match="runs is a file, not a directory"):
        save_checkpoint(writer(5), tmp_path / "runs" / "exp" / "m.pt")
    assert listing(tmp_path) == {"runs": 15}


def test_a_save_that_writes_elsewhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="save wrote nothing at the path it was given"):
        save_checkpoint(lambda p: Path(p + ".npy").write_bytes(b"x"), tmp_path / "a.pt")
    stray = [n for n in listing(tmp_path) if n.endswith(".npy")]
    for name in stray:  # what the caller's save wrote elsewhere is its own
        (tmp_path / name).unlink()
    assert listing(tmp_path) == {}


def test_leftovers_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = tmp_path / f"{PARTIAL}{host_tag()}-{dead.stdout.strip()}-0123abcd-m.pt"
    alive = tmp_path / f"{PARTIAL}{host_tag()}-1-0123abcd-m.pt"  # pid 1: alive, not ours
    other_host = tmp_path / f"{PARTIAL}ffffff-{dead.stdout.strip()}-0123abcd-m.pt"
    # review 5: another container with this hostname (its own boot and pid namespace): its
    # pid means nothing here, so its partial is not taken for a dead process's
    twin = {**process_home(), "boot": "another-machine", "pidns": "pid:[4026531999]"}
    same_name = tmp_path / f"{PARTIAL}{host_tag(twin)}-{dead.stdout.strip()}-0123abcd-m.pt"
    for p in (stale, alive, other_host, same_name):
        p.write_bytes(b"partial")
    save_checkpoint(writer(3), tmp_path / "m.pt")
    kept = ["m.pt", alive.name, other_host.name, same_name.name]
    assert sorted(listing(tmp_path)) == sorted(kept)


CHILD = textwrap.dedent(
    """
    import sys, time
    from trainwatch_lab.fix import save_checkpoint

    def slow(path):
        with open(path, "wb") as fh:
            for _ in range(1000):
                fh.write(b"n" * 65536)
                fh.flush()
                time.sleep(0.01)

    save_checkpoint(lambda p: open(p, "wb").write(b"good"), sys.argv[1] + "/model.pt")
    print("first save done", flush=True)
    save_checkpoint(slow, sys.argv[1] + "/model.pt", keep=1)
    """
)


def test_ctrl_c_mid_write_in_a_real_process(tmp_path: Path) -> None:
    """SIGINT from outside while ``save`` writes: the old save is whole, nothing partial."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "first save done"

    def written() -> int:  # the save writes inside its private directory
        found = [p for p in tmp_path.iterdir() if p.name.startswith(PARTIAL)]
        return sum(f.stat().st_size for f in found[0].rglob("*")) if found else 0

    assert wait_until(lambda: written() > 256 * 1024, 30)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    assert listing(tmp_path) == {"model.pt": 4}
    assert (tmp_path / "model.pt").read_bytes() == b"good"


def test_series_and_pattern_directories() -> None:
    import re

    assert re.fullmatch(series_pattern("epoch-003.pt"), "epoch-117.pt")
    assert not re.fullmatch(series_pattern("epoch-003.pt"), "best-003.pt")
    assert re.fullmatch(series_pattern("last.pt"), "last.pt")
    assert not re.fullmatch(series_pattern("m.weights.h5"), "mXweights.h5")
    assert directory_of_pattern("/r/ckpt/model_{epoch:02d}.keras") == "/r/ckpt"
    assert directory_of_pattern("/r/{epoch}/model.keras") == "/r"
    assert directory_of_pattern("/r/ckpt/model.keras") == "/r/ckpt"


def test_space_watch_answers_from_its_latest_readings(tmpfs_mount) -> None:
    disk = tmpfs_mount("8m").path
    (disk / "ckpt").mkdir()
    (disk / "ckpt" / "epoch-1.pt").write_bytes(b"x" * (3 * MIB))
    watch = SpaceWatch([disk / "ckpt"], every=0.05).start()
    try:
        assert watch.wait_measured(10)
        assert watch.check() is None  # 3 MiB saved, ~5 MiB free
        (disk / "filler").write_bytes(b"x" * (3 * MIB))
        assert wait_until(lambda: watch.check() is not None, 10)
        refusal = watch.check("epoch-2.pt")
        assert isinstance(refusal, CheckpointWontFit) and refusal.needed == 3 * MIB
        assert refusal.directory == str(disk / "ckpt")
    finally:
        watch.close()


def test_a_paused_share_is_refused_without_calling_save(
    sshfs_mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every touch of the directory but the save itself goes through the mount guard: a share
    that does not answer costs the timeout and an error, never a hang."""
    from trainwatch_lab.core.guard.guard import MountUnresponsive
    from trainwatch_lab.fix.checkpoint import save as checkpoint

    monkeypatch.setattr(checkpoint, "PLAN_TIMEOUT_S", 1.0)
    called: list[str] = []
    sshfs_mount.pause()
    try:
        t0 = time.monotonic()
        with pytest.raises(MountUnresponsive, match=r"no answer within 1\.0 s"):
            save_checkpoint(called.append, sshfs_mount.path / "ckpt" / "m.pt")
        assert time.monotonic() - t0 < 3.0
    finally:
        sshfs_mount.resume()
    assert called == []
