"""Who writes into the watched paths (core.processes.writes): real fanotify, real writers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.env import need_root
from trainwatch_lab.core.processes.writes import WriteWatch, hidden_below, under

WRITE = (
    "import sys\n"
    "for path, size in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    "    open(path, 'wb').write(b'x' * int(size))\n"
)


def test_under_picks_the_longest_root() -> None:
    roots = {"/data", "/data/runs", "/datasets"}
    assert under("/data/runs/a.pt", roots) == "/data/runs"
    assert under("/data/b.pt", roots) == "/data"
    assert under("/datasets2/c", roots) is None
    assert hidden_below("/home/u/.cache/pip/w.whl", "/home/u")
    assert hidden_below("/home/u/runs/.state.npy.swp", "/home/u")
    assert not hidden_below("/data/.runs/ckpt/a.pt", "/data/.runs")  # the root itself may be


def test_a_process_that_saves_a_large_file_under_a_watched_path_is_named(
    tmp_path: Path, loop_ext4
) -> None:
    need_root()
    disk = loop_ext4(size_mb=32)
    watched, elsewhere = disk.mountpoint / "ckpt", disk.mountpoint / "other"
    watched.mkdir()
    elsewhere.mkdir()
    watch = WriteWatch()
    try:
        assert watch.available, watch.note
        watch.cover({str(watched): (str(disk.mountpoint), "local")})
        big, small, outside = watched / "state.npy", watched / "train.py", elsewhere / "x.npy"
        args = [str(big), str(2 << 20), str(small), "4096", str(outside), str(2 << 20)]
        first = subprocess.Popen([sys.executable, "-c", WRITE, *args])
        small_only = subprocess.Popen([sys.executable, "-c", WRITE, str(small), "4096"])
        outside_only = subprocess.Popen([sys.executable, "-c", WRITE, str(outside), "4096000"])
        for proc in (first, small_only, outside_only):
            assert proc.wait() == 0
        # the large file under the watched path names its writer; a small one (a source an
        # editor saved) or one outside does not
        assert watch.take() == {first.pid: {str(watched)}}
        assert watch.take() == {}  # each close is told once
        big.write_bytes(b"x" * (2 << 20))  # our own writes are not a run's
        assert watch.take() == {}
        watch.cover({})  # nothing watched: nothing told, and the mount no longer marked
        subprocess.run([sys.executable, "-c", WRITE, str(big), str(2 << 20)], check=True)
        assert watch.take() == {}
        unwatched = subprocess.run([sys.executable, "-c", WRITE, str(big), str(2 << 20)])
        watch.cover({str(watched): (str(disk.mountpoint), "local")})
        # a write while nothing was watched was never queued by the kernel (the mark stayed,
        # and every close-after-write on the mount was sent to us to be dropped)
        assert watch.take() == {}, unwatched.pid
    finally:
        watch.close()
