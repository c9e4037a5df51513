"""The mirror against a real network filesystem whose server stops answering (sshfs with a
paused sftp-server): training writes never wait, the share catches up, exit is bounded."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.mounts import SshfsMount, child_on_paused_share, wait_until
from trainwatch_lab.fix.mirror.mirror import local_mirror

REPO = Path(__file__).resolve().parents[3]
PAUSE_S = 6.0
STEP_S = 0.01


def remote_of(mount: SshfsMount, path: Path) -> Path:
    """The same file seen on the server's side (never through the paused mount)."""
    return mount.remote / path.relative_to(mount.mountpoint)


def local_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_a_summary_writer_never_waits_on_a_paused_share(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    pytest.importorskip("tensorboardX")
    from tensorboardX import SummaryWriter

    share = sshfs_mount.path / "runs" / "exp1"
    mirror = local_mirror(share, every=0.2, local_root=tmp_path)
    writer = SummaryWriter(mirror, flush_secs=1)
    steps: list[tuple[float, float]] = []  # (start, duration) of each training step

    def train(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            i = len(steps)
            writer.add_scalar("loss", 1.0 / (i + 1), i)
            if i % 10 == 0:
                writer.add_text("note", f"step {i}", i)
                writer.flush()  # the event file grows on local disk, ranges go to the share
            steps.append((time.monotonic(), time.perf_counter() - t0))
            time.sleep(STEP_S)

    try:
        train(1.5)
        assert mirror.sync(15), mirror.status()
        sshfs_mount.pause()
        paused_at = time.monotonic()
        train(PAUSE_S)
        assert wait_until(lambda: mirror.status().state == "share-unresponsive", 10)
        during = mirror.status()
        assert during.bytes_pending > 0 and "kept locally" in during.text()
        sshfs_mount.resume()
        resumed_at = time.monotonic()
        train(1.5)
        writer.close()
        assert mirror.sync(60), mirror.status()
    finally:
        sshfs_mount.resume()
        writer.close()
        mirror.close(10)
    paused = [d for t, d in steps if paused_at <= t <= resumed_at]
    assert len(paused) > PAUSE_S / STEP_S / 4  # the loop kept stepping while the share slept
    assert max(d for _, d in steps) < 0.25, sorted(d for _, d in steps)[-5:]
    assert statistics.median(d for _, d in steps) < 0.01
    files = local_files(mirror.path)
    assert any("tfevents" in name for name in files)
    assert {n: remote_of(sshfs_mount, share / n).read_bytes() for n in files} == files


CHILD = textwrap.dedent(
    """
    import sys, time
    from trainwatch_lab.fix.mirror.mirror import local_mirror

    m = local_mirror(sys.argv[1], every=0.2, local_root=sys.argv[2])
    m.exit_timeout = 2.0
    (m.path / "a.log").write_text("before")
    assert m.sync(15)
    print("synced", flush=True)
    sys.stdin.readline()  # the share is paused now
    (m.path / "a.log").write_text("after the pause")
    time.sleep(0.5)
    print("exiting", flush=True)
    """
)


def test_exit_is_bounded_while_the_share_is_paused(sshfs_mount: SshfsMount, tmp_path: Path) -> None:
    share = sshfs_mount.path / "exp2"
    with child_on_paused_share(sshfs_mount, CHILD, share, tmp_path, ready="synced") as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "exiting"
        proc.wait(timeout=15)  # the final sync's bound is 2 s: a wide margin
    err = proc.stderr.read() if proc.stderr else ""
    assert "does not answer" in err or "no answer" in err, err
    assert remote_of(sshfs_mount, share / "a.log").read_text() == "before"


def test_the_cli_stops_within_its_timeout_and_says_what_is_left(
    sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    local = tmp_path / "runs"
    local.mkdir()
    (local / "a.log").write_text("first")
    share = sshfs_mount.path / "cli"
    cmd = [sys.executable, "-m", "trainwatch_lab", "mirror", "--every", "0.2", "--timeout", "1"]
    proc = subprocess.Popen(
        [*cmd, str(local), str(share)], cwd=REPO, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_until(lambda: remote_of(sshfs_mount, share / "a.log").exists(), 20)
        sshfs_mount.pause()
        (local / "b.log").write_text("second")
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=15)
        assert time.monotonic() - t0 < 1.0 + 3.0
    finally:
        sshfs_mount.resume()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "share not answering" in err and "kept locally" in err, err
