"""CSV export through the mount guard: written atomically on a live disk; on a share that
stopped answering, a clear line in the widget and no thread left stuck in the kernel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.notebook.dashboard.widget import TrainWatch
from trainwatch_lab.notebook.export import ExportError


@pytest.fixture
def dash() -> Iterator[TrainWatch]:
    tw = TrainWatch([], probe=False, gpu=False, inline=False, start=False)
    tw.sampler.tick()
    tw.sampler.tick()
    try:
        yield tw
    finally:
        tw.close()


def export_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trainwatch-export" and t.is_alive()]


def test_export_writes_the_history_and_leaves_nothing_else(dash: TrainWatch, tmp_path) -> None:
    target = tmp_path / "history.csv"
    target.write_text("an older export\n")
    assert dash.export_csv(target, wait=True) == str(target)
    lines = target.read_text().splitlines()
    assert lines[0].startswith("t,") and len(lines) == 3  # header + two samples
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.csv"]
    assert "Saved 2 samples" in dash.export_status.value


def test_export_into_a_missing_directory_says_why(dash: TrainWatch, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="was not written: No such file or directory"):
        dash.export_csv(tmp_path / "no" / "such.csv", wait=True)
    assert "CSV export failed" in dash.export_status.value


def test_export_to_a_dead_share_fails_clearly_and_nothing_stays_stuck(
    dash: TrainWatch, sshfs_mount
) -> None:
    target = sshfs_mount.path / "history.csv"
    dash.export_csv(target, wait=True)  # the share answers: written as anywhere else
    assert target.read_text().startswith("t,")
    dash.sampler.tick()
    sshfs_mount.pause()
    try:
        with pytest.raises(ExportError) as err:
            dash.export_csv(target, wait=True, timeout=2.0)
        message = str(err.value)
        assert f"{target} was not written" in message
        assert f"filesystem at {sshfs_mount.mountpoint} did not answer" in message
        assert "\n" not in message
        assert "did not answer" in dash.export_status.value
        assert export_threads() == []  # the kernel holds no thread in the dead mount
    finally:
        sshfs_mount.resume()
    # once the server answers again the abandoned helper removes its temporary file, and
    # the previous export is still whole (the new one was never renamed over it)
    left = lambda: sorted(p.name for p in sshfs_mount.path.iterdir())  # noqa: E731
    assert wait_until(lambda: left() == ["history.csv"], 30), left()
    assert len(target.read_text().splitlines()) == 3
