"""Bounded traffic: bytes each tick sends to the browser, measured at the comm.

The widgets get a recording comm (``comm.create_comm`` is the documented hook for that), the
History gets hours of samples, and each tick runs the dashboard's real update path. Sizes are
what ipywidgets hands the kernel to send: JSON state plus binary buffers.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

import comm
import numpy as np
import pytest
from comm.base_comm import BaseComm

from tests.support.lab import artifact_path
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, DiskRates, GpuState, PathState, ProbeResult, Sample
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.notebook.dashboard.bqcharts import MAX_POINTS, downsample, drawable
from trainwatch_lab.notebook.dashboard.widget import TrainWatch


class RecordingComm(BaseComm):
    log: ClassVar[list[tuple[str, int]]] = []

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        body = json.dumps({"data": data or {}, "metadata": metadata or {}, **keys}, default=str)
        size = len(body.encode()) + sum(memoryview(b).nbytes for b in buffers or [])
        RecordingComm.log.append((msg_type, size))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    RecordingComm.log = []
    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(*a, **k))
    return RecordingComm.log


def synthetic(t: float, i: int, path: str) -> Sample:
    """A busy training box: two disks, one GPU, one watched path that slowly fills."""
    wave = 50 + 40 * math.sin(i / 7)
    return Sample(
        t=t,
        disks={
            name: DiskRates(name, 100, 200, wave * k, 2 * wave * k, 0.5, 3.0, 1.2, min(99, wave))
            for k, name in ((1, "nvme0n1"), (0.1, "sda"))
        },
        paths={
            path: PathState(
                path=path,
                exists=True,
                mountpoint="/",
                fstype="ext4",
                device="nvme0n1",
                kind="local",
                total_bytes=10**12,
                free_bytes=5 * 10**11 - i * 10**6,
                avail_bytes=4 * 10**11 - i * 10**6,
                probe=ProbeResult(0.4, 1.1, 16),
            )
        },
        gpus=[
            GpuState(
                index=0,
                nvml_index=0,
                uuid="GPU-0",
                name="Test GPU",
                util_pct=float(i % 100),
                mem_used_bytes=8 * 2**30 + i,
                mem_total_bytes=80 * 2**30,
            )
        ],
        warnings=[Alert("disk-saturated", "warning", "nvme0n1", f"busy {i % 3}", "fix")]
        if i % 50 < 10
        else [],
    )


def make_dash(window: float, capacity: int = 7200) -> tuple[TrainWatch, Sampler]:
    sampler = Sampler([], interval=1.0, history=History(capacity=capacity))
    dash = TrainWatch(sampler=sampler, window=window, inline=False, start=False)
    dash.start(run_sampler=False)  # we append the samples and call the subscriber by hand
    return dash, sampler


def feed(dash: TrainWatch, sampler: Sampler, start: int, count: int, path: str) -> None:
    for i in range(start, start + count):
        sample = synthetic(1_700_000_000.0 + i, i, path)
        sampler.history.append(sample)
        dash._on_sample(sample)  # what the sampler thread calls after each tick


@pytest.mark.parametrize("window", [60.0, 600.0, 3600.0])
def test_bytes_per_tick_stay_bounded(recorded: list, window: float) -> None:
    path = "/data/run"
    dash, sampler = make_dash(window)
    feed(dash, sampler, 0, int(window) + 30, path)  # fill the window
    recorded.clear()
    ticks = 300
    feed(dash, sampler, int(window) + 30, ticks, path)
    sizes = [s for kind, s in recorded if kind == "comm_msg"]
    per_tick = sum(sizes) / ticks
    for chart in dash.charts.values():
        assert chart.points <= MAX_POINTS + 1  # windowed and downsampled
    assert dash.charts["io"].points > 0 and dash.charts["gpu"].points > 0
    # 5 charts x (<= 241 float64 x + 4 series x float32 y) is the worst case per redraw
    worst = 5 * (241 * 8 + 4 * 241 * 4) + 4096
    assert per_tick < worst
    out = artifact_path("notebook-traffic.json")
    data = json.loads(out.read_text()) if out.exists() else {}
    data[f"window_{int(window)}s"] = {
        "bytes_per_tick": round(per_tick),
        "messages_per_tick": round(len(sizes) / ticks, 2),
        "largest_message": max(sizes),
        "points_per_line": dash.charts["io"].points,
        "chart_redraws": dash.chart_updates,
    }
    out.write_text(json.dumps(data, indent=1))
    dash.close()


def test_paused_and_unchanged_ticks_send_almost_nothing(recorded: list) -> None:
    dash, sampler = make_dash(600.0)
    feed(dash, sampler, 0, 100, "/p")
    dash.pause()
    recorded.clear()
    feed(dash, sampler, 100, 50, "/p")
    sizes = [s for kind, s in recorded if kind == "comm_msg"]
    # the header every tick (it shows the sample count), and the hidden warnings pane when
    # its list changes: disk-saturated starts at tick 100 and ends at tick 110
    assert len(sizes) == 50 + 2
    assert max(sizes) < 1024
    dash.close()


def views(dash: TrainWatch, count: int) -> None:
    """What the browser sends when it makes or removes a view of the dashboard: an
    ``update`` of ``_view_count`` on the widget's comm, handled as ipywidgets handles it."""
    dash._handle_msg({"content": {"data": {"method": "update", "state": {"_view_count": count}}}})


def test_a_dashboard_nobody_sees_sends_nothing_and_catches_up_when_seen(recorded: list) -> None:
    dash, sampler = make_dash(600.0)
    assert dash._view_count == 0  # the browser is asked to count its views
    feed(dash, sampler, 0, 60, "/p")
    views(dash, 1)  # shown
    feed(dash, sampler, 60, 5, "/p")
    assert [k for k, _ in recorded].count("comm_msg") >= 5  # drawn while seen
    drawn_to = float(np.max(dash.charts["io"].lines.x))
    views(dash, 0)  # its output cleared: no view left
    recorded.clear()
    redraws = dash.chart_updates
    feed(dash, sampler, 65, 120, "/p")
    assert [k for k, _ in recorded if k == "comm_msg"] == []
    assert dash.samples == 185 and dash.chart_updates == redraws  # counted, not drawn
    views(dash, 1)  # shown again: the charts and header as of now, at once
    assert dash.chart_updates == redraws + 1
    assert np.max(dash.charts["io"].lines.x) - drawn_to == pytest.approx(120, abs=15)
    dash.close()


def test_a_dashboard_never_shown_keeps_drawing() -> None:
    """Nothing says where a dashboard never shown is read (a frontend without widgets
    counts no views): it draws as before."""
    dash, sampler = make_dash(600.0)
    feed(dash, sampler, 0, 30, "/p")
    assert dash.chart_updates > 0 and dash.charts["io"].points > 0
    dash.close()


def test_memory_stays_flat_over_hours() -> None:
    """History is a fixed ring; the dashboard keeps only the arrays it last sent."""
    dash, sampler = make_dash(600.0, capacity=900)
    feed(dash, sampler, 0, 900, "/p")
    cols_before = {k: len(v) for k, v in sampler.history._cols.items()}
    feed(dash, sampler, 900, 1800, "/p")
    assert len(sampler.history) == 900
    assert {k: len(v) for k, v in sampler.history._cols.items()} == cols_before
    assert dash.charts["io"].points <= MAX_POINTS + 1
    dash.close()


def test_downsample_keeps_peaks_and_bounds_points() -> None:
    t = np.arange(3600, dtype=float) + 1_700_000_000.0
    ys = np.vstack([np.zeros(3600), np.full(3600, 5.0)])
    ys[0, 1234] = 99.0
    ys[1, 2000:2010] = np.nan
    bx, by = downsample(t, ys, 15.0, "max")
    assert len(bx) <= 241 and by.shape == (2, len(bx))
    assert by[0].max() == 99.0  # a one-second spike survives the 15 s bucket
    assert not np.isnan(by[1]).any()  # a short gap inside a bucket is not a hole
    _, low = downsample(t, ys, 15.0, "min")
    assert low[0].max() == 0.0


def test_drawable_ends_every_line_on_a_value_and_keeps_gaps() -> None:
    """bqplot reads each line's last point (its label's place): never a NaN there."""
    nan = np.nan
    x = np.arange(4.0)
    assert drawable(x, np.full((2, 4), nan)) is None  # nothing measured: an empty chart
    same = np.array([[1.0, 2.0, 3.0, 4.0], [1.0, nan, 2.0, 3.0]])
    out = drawable(x, same)
    assert out is not None and out[0] is x and out[1] is same  # the shared x, unchanged
    xs, ys, opacities = drawable(
        x, np.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, nan, nan], [nan] * 4])
    ) or ((), (), ())
    assert np.isfinite(ys[:, -1]).all()
    assert list(xs[1]) == [0.0, 1.0, 2.0, 1.0] and list(ys[1, [0, 1, 3]]) == [1.0, 2.0, 2.0]
    assert np.isnan(ys[1, 2])  # the missing value stays a gap, no line drawn across it
    assert list(xs[0]) == list(x) and opacities == [1.0, 1.0, 0.0]
