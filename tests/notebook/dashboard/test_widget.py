"""The compact dashboard without a browser: its words, its ticks, its charts' lines, what it
remembers per notebook, and how its controls are routed (tests/notebook/test_browser.py
looks at the same things on screen)."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comm.base_comm import BaseComm

from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, DiskRates, Headline, PathState, Sample
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.notebook.dashboard import prefs
from trainwatch_lab.notebook.dashboard.bqcharts import TimeChart, break_gaps, evaluate
from trainwatch_lab.notebook.dashboard.charts import space_series
from trainwatch_lab.notebook.dashboard.subshell import follow_frontend_subshell
from trainwatch_lab.notebook.dashboard.view import HeaderState, header_html
from trainwatch_lab.notebook.dashboard.widget import TrainWatch
from trainwatch_lab.notebook.ticks import nice_axis, time_ticks

T0 = 1_700_000_000.0
GIB = 2**30


# -- ticks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("peak", [0.0, 0.0004, 0.457, 3.3, 45.0, 99.9, 1234.0, 7.7e5])
def test_y_ticks_are_round_numbers_from_zero_that_hold_the_peak(peak: float) -> None:
    top, ticks = nice_axis(peak)
    assert ticks[0] == 0 and ticks[-1] == top >= peak and 3 <= len(ticks) <= 5
    step = ticks[1]
    mantissa = step / 10 ** np.floor(np.log10(step))
    assert round(mantissa, 9) in (1, 2, 5)  # never 0.152 / 0.305 / 0.457
    assert all(abs(b - a - step) < 1e-9 * top for a, b in itertools.pairwise(ticks))


def test_y_axis_keeps_its_top_while_the_peak_uses_a_third_of_it() -> None:
    top, _ = nice_axis(45.0)
    assert nice_axis(30.0, keep=top)[0] == top  # no flapping, no message
    assert nice_axis(10.0, keep=top)[0] < top  # shrinks once the peak is small


@pytest.mark.parametrize("span", [1.0, 2.0, 5.0, 30.0, 59.0, 60.0, 300.0, 600.0, 3600.0, 86400.0])
def test_time_ticks_are_round_local_times_with_distinct_labels(span: float) -> None:
    end = T0 + 12.3
    ticks, labels = time_ticks(end - span, end)
    assert ticks and len(labels) == len(set(labels))  # "short spans repeat one label"
    assert all(end - span <= t <= end for t in ticks)
    for t, label in zip(ticks, labels, strict=True):
        local = time.localtime(t)
        assert label == time.strftime("%H:%M" if len(label) == 5 else "%H:%M:%S", local)
        assert len(label) in (5, 8)  # 24-hour clock, no am/pm
    if span >= 300:
        assert all(len(label) == 5 for label in labels)  # whole minutes: no ":00" noise


def test_a_pause_in_the_samples_is_a_gap_in_the_line() -> None:
    t = np.array([0.0, 1.0, 2.0, 10.0, 11.0])
    ys = np.arange(10.0).reshape(2, 5)
    bt, by = break_gaps(t, ys, 3.0)
    assert bt.tolist() == [0.0, 1.0, 2.0, 3.0, 10.0, 11.0]
    assert np.isnan(by[:, 3]).all() and by.shape == (2, 6)
    steady_t, steady_y = break_gaps(t[:3], ys[:, :3], 3.0)
    assert steady_t.tolist() == [0.0, 1.0, 2.0] and not np.isnan(steady_y).any()


# -- the header ------------------------------------------------------------------------------


def headline_sample(level: str = "warning") -> Sample:
    s = Sample(t=T0)
    s.headline = Headline(
        level=level,  # type: ignore[arg-type]
        verdict="2 warnings (1 critical)",
        facts=["GPU 87 %", "vda 45.1 MB/s, 62 % busy", "1 GiB (10 %) free on /scratch"],
    )
    return s


def test_header_takes_its_words_from_the_headline() -> None:
    html = header_html(headline_sample(), HeaderState("live", 12, 11, 1.0, 600.0))
    assert "2 warnings (1 critical)" in html
    assert "GPU 87 % · vda 45.1 MB/s, 62 % busy · 1 GiB (10 %) free on /scratch" in html
    assert "data-level='warning'" in html and 'data-state="live"' in html
    assert time.strftime("%H:%M:%S", time.localtime(T0)) in html
    assert len(html.encode()) < 600  # it travels every tick


def test_stale_clock_is_three_intervals_and_only_while_samples_should_come() -> None:
    s = headline_sample("ok")
    live = header_html(s, HeaderState("live", 3, 2, 2.0, 600.0))
    assert "--tw-stale-after:6s" in live and "tw-stale" in live
    fast = header_html(s, HeaderState("live", 3, 2, 0.1, 600.0))
    assert "--tw-stale-after:1.5s" in fast  # jitter alone must not flicker it
    assert "--tw-stale-after:3s" in header_html(s, HeaderState("paused", 3, 2, 1.0, 60.0))
    stopped = header_html(s, HeaderState("stopped", 3, 2, 1.0, 600.0))
    assert "tw-stale" not in stopped and "data-kind='stopped'" in stopped


# -- space used per filesystem ------------------------------------------------------------------


def path_state(path: str, mountpoint: str, fstype: str, total: int, avail: int) -> PathState:
    return PathState(
        path=path,
        exists=True,
        mountpoint=mountpoint,
        fstype=fstype,
        kind="memory" if fstype == "tmpfs" else "local",
        total_bytes=total,
        free_bytes=avail,
        avail_bytes=avail,
    )


def test_space_is_one_line_per_filesystem_in_percent_used() -> None:
    s = Sample(t=T0)
    s.paths = {
        "/data/logs": path_state("/data/logs", "/data", "xfs", 4096 * GIB, 1000 * GIB),
        "/data/ckpt": path_state("/data/ckpt", "/data", "xfs", 4096 * GIB, 1000 * GIB),
        "/dev/shm/x": path_state("/dev/shm/x", "/dev/shm", "tmpfs", 64 * 2**20, 2**20),
    }
    series = space_series(s)
    assert [x.label for x in series] == ["/data (xfs)", "/dev/shm (tmpfs)"]
    assert all(x.kind == "used_pct" for x in series)


def test_the_space_chart_reads_as_df() -> None:
    """Issue 23 item 7: df said 25 % used, the chart 70 % (avail over size, with the
    blocks reserved for root counted as used)."""
    s = PathState("/", exists=True, mountpoint="/", fstype="ext4")
    s.total_bytes, s.free_bytes, s.avail_bytes = 1000 * GIB, 850 * GIB, 300 * GIB
    (series,) = space_series(Sample(t=T0, paths={"/": s}))
    cols = {k: np.array([float(getattr(s, k[2]))]) for k in series.keys}
    assert evaluate(series, cols, 1)[0] == pytest.approx(100 * 150 / 450)  # df: 34 %


# -- the dashboard -----------------------------------------------------------------------------


@pytest.fixture
def notebook_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TRAINWATCH_LAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "train.ipynb"))
    prefs.forget_memory()
    yield tmp_path / "state" / "dashboard.json"
    prefs.forget_memory()


def sample(i: int, paths: dict[str, PathState] | None = None) -> Sample:
    s = Sample(t=T0 + i)
    s.disks = {"vda": DiskRates("vda", 10, 20, 1.0 + i % 3, 2.0, 0.5, 3.0, 1.2, 40.0)}
    s.paths = paths if paths is not None else {}
    return s


def make(**kwargs: Any) -> tuple[TrainWatch, Sampler]:
    sampler = Sampler([], interval=1.0, history=History(capacity=600))
    dash = TrainWatch(sampler=sampler, inline=False, start=False, **kwargs)
    dash.start(run_sampler=False)
    return dash, sampler


def feed(dash: TrainWatch, sampler: Sampler, samples: list[Sample]) -> None:
    for s in samples:
        sampler.history.append(s)
        dash._on_sample(s)


def test_details_open_on_demand_and_are_remembered_per_notebook(notebook_state: Path) -> None:
    first, _ = make()
    assert not first.details_open and first.details.layout.display == "none"
    assert "await" not in first.charts  # made when first opened
    first.details_button.value = True
    assert first.details.layout.display == "flex" and "await" in first.charts
    first.close()
    again, _ = make()  # %trainwatch run again in the same kernel
    assert again.details_open
    again.close()
    deadline = time.monotonic() + 5
    while not notebook_state.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    saved = json.loads(notebook_state.read_text())["notebooks"]
    assert saved[str(notebook_state.parent.parent / "train.ipynb")]["details"] is True
    prefs.forget_memory()  # a new kernel: read back from the file
    restarted, _ = make()
    assert restarted.details_open
    restarted.close()
    assert make(details=False)[0].details_open is False  # an explicit choice wins


def test_first_sample_is_drawn_at_once_on_a_pinned_axis() -> None:
    dash, sampler = make()
    root = path_state("/data", "/data", "xfs", 100 * GIB, 40 * GIB)
    feed(dash, sampler, [sample(0, {"/data": root})])
    space = dash.charts["space"]
    assert len(space.lines.x) == 2 and space.lines.x[0] == space.lines.x[1]  # a dot
    assert float(np.asarray(space.lines.y).ravel()[0]) == pytest.approx(60.0)  # % used
    assert space.x_scale.max - space.x_scale.min == pytest.approx(1.0)  # a dot, never 0 wide
    assert space.x_axis.visible and space.x_axis.tick_labels
    feed(dash, sampler, [sample(i, {"/data": root}) for i in range(1, 40)])
    assert space.x_scale.min is None and space.x_scale.max is None  # released: data decides
    labels = list(space.x_axis.tick_labels.values())
    assert len(labels) == len(set(labels)) >= 2
    assert dash.charts["io"].points == 40 and "vda write" in dash.charts["io"].lines.labels
    dash.close()


def test_no_watched_path_says_so_instead_of_an_empty_chart() -> None:
    dash, sampler = make()
    feed(dash, sampler, [sample(0), sample(1)])
    assert dash.charts["space"].figure not in dash.grid.children
    assert dash.space_note in dash.grid.children
    assert "No watched path" in dash.space_note.value
    dash.close()


def test_stopped_disables_pause_and_window() -> None:
    dash, sampler = make()
    feed(dash, sampler, [sample(0), sample(1)])
    dash.stop("stopped")
    assert dash.pause_button.disabled and dash.window_select.disabled
    assert 'data-state="stopped"' in dash.status.value and "tw-stale" not in dash.status.value
    dash.close()


def test_warnings_under_details_update_while_closed_only_when_they_change() -> None:
    dash, sampler = make()
    feed(dash, sampler, [sample(0)])
    warned = sample(1)
    warned.warnings = [Alert("disk-saturated", "warning", "vda", "vda 95 % busy", "fix it")]
    feed(dash, sampler, [warned])
    assert "disk-saturated" in dash.alerts_pane.html and "fix it" in dash.alerts_pane.html
    dash.close()


class RoutedComm(BaseComm):
    """ipykernel 7.4's comm: it routes a comm's messages to where it last published."""

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, **k: Any) -> None:
        pass

    def _reply_subshell_for(self, data: Any, default: str | None) -> str | None:
        return None  # the main shell


def test_controls_follow_the_frontends_subshell(monkeypatch: pytest.MonkeyPatch) -> None:
    import comm

    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RoutedComm(*a, **k))
    dash, _ = make()
    for control in (dash.pause_button, dash.window_select, dash.details_button):
        assert control.comm._reply_subshell_for({"method": "update"}, "sub-1") == "sub-1"
    follow_frontend_subshell(TimeChart("x", "y").plot)  # any widget: harmless
    dash.close()


def test_gpus_are_selected_by_index_or_by_gpu_or_mig_uuid(notebook_state: Path) -> None:
    """``TrainWatch(gpus=[...])`` and ``%trainwatch --gpu`` take what ``nvidia-smi -L``
    prints: a GPU's UUID, a MIG instance's UUID (the GPU it splits), or a CUDA index."""
    from trainwatch_lab.core.model import GpuState

    def gpu_sample(i: int) -> Sample:
        split = GpuState(1, 1, "GPU-bbbb-2222", "NVIDIA H200", util_pct=None)
        split.mig = [{"uuid": "MIG-cccc-3333"}]
        whole = GpuState(0, 0, "GPU-aaaa-1111", "NVIDIA H200", util_pct=50.0)
        return Sample(t=T0 + i, gpus=[whole, split])

    for gpus, shown in ((["GPU-aaaa"], True), (["MIG-cccc-3333"], True), ([0], True),
                        (["GPU-ffff"], False)):  # fmt: skip
        dash, sampler = make(gpus=gpus)
        feed(dash, sampler, [gpu_sample(i) for i in range(3)])
        assert (dash.charts["gpu"].figure in dash.grid.children) is shown, gpus
        if not shown:
            assert "none of the GPUs GPU-ffff is present" in dash.gpu_note.value
        dash.stop()


def five_warnings(full_in: str) -> list[Alert]:
    """Five warnings, most severe first (the Advisor's order); long sentences, as the real ones."""
    tail = " and the rest of a sentence long enough to need more than one line " * 2
    return [
        Alert(
            "disk-filling", "critical", "/fs", f"/fs fills at 3 MB/s: full in {full_in}{tail}", "F1"
        ),
        Alert("checkpoint-wont-fit", "critical", "/fs/ckpt", f"ckpt-3 will not fit{tail}", "F2"),
        Alert("disk-almost-full", "warning", "/fs", f"Only 2 MiB of 40 MiB is free{tail}", "F3"),
        Alert("slow-mount", "warning", "/share", f"/share is slow{tail}", "F4"),
        Alert("disk-saturated", "warning", "vda", f"vda is 95 % busy{tail}", "F5"),
    ]


def test_verdict_says_the_worst_warning_and_details_list_one_line_each() -> None:
    """Issue 23 item 6: the verdict line gave counts only ("5 warnings (3 critical)"), and
    Details showed every warning in full (1,700 px). Now the header carries the worst
    warning's sentence; Details one line per warning, opened one at a time, and a warning
    opened stays open while its numbers change."""
    dash, sampler = make(details=True)
    s = sample(0)
    s.warnings = five_warnings("10 s")
    feed(dash, sampler, [s])
    head = dash.status.value
    assert "class='tw-worst'" in head and "/fs fills at 3 MB/s: full in 10 s" in head
    assert "data-warnings='5'" in head
    pane = dash.alerts_pane
    assert len(pane.rows) == 5
    lines = [row.line.value for row in pane.rows.values()]
    assert all("tw-warn-line" in x and "Fix" not in x and "<br>" not in x for x in lines)
    assert all(row.body.layout.display == "none" for row in pane.rows.values())
    first = pane.rows[("disk-filling", "/fs")]
    first.toggle.value = True  # the browser's click
    assert first.body.layout.display == "block" and "F1" in first.body.value
    s2 = sample(1)
    s2.warnings = five_warnings("8 s")
    feed(dash, sampler, [s2])
    assert pane.rows[("disk-filling", "/fs")] is first and first.toggle.value
    assert "full in 8 s" in first.line.value and "full in 8 s" in first.body.value
    assert "⛔" not in pane.html and '<svg class="tw-icon"' in pane.html
    s3 = sample(2)
    s3.warnings = []
    feed(dash, sampler, [s3])
    assert not pane.rows and "no warnings" in pane.html and "tw-worst" not in dash.status.value
    dash.close()


def test_charts_scale_to_the_data_they_have_until_the_window_fills() -> None:
    """Issue 23 item 8: the embedding notebook's hand-ticked widget drew 6 samples on a
    10 min (then a 30 s) axis, a sliver at its left edge, and ``window_select = 300`` changed
    the dropdown only. The axis spans the data; each chart says how much of the window it
    has, so the window picked shows."""
    dash, sampler = make()
    root = path_state("/data", "/data", "xfs", 100 * GIB, 40 * GIB)
    for i in range(6):  # ticked by hand, 0.2 s apart
        s = sample(0, {"/data": root})
        s.t = T0 + 0.2 * i
        feed(dash, sampler, [s])
    io = dash.charts["io"]
    assert io.points >= 2  # (one point per sampling interval: two here)
    x = np.asarray(io.lines.x, dtype=float)
    lo, hi = io.x_scale.min, io.x_scale.max
    if lo is not None:  # pinned: to about the data, never a long empty axis
        assert hi - lo <= 1.5 and lo <= x.min() and hi >= x.max()
    assert "1 s of 10 min" in io.head.value and "of 10 min" in dash.charts["space"].head.value
    dash.window_select.value = 300.0
    assert "1 s of 5 min" in io.head.value  # the window picked is visible at once
    dash.close()


def test_details_opened_on_a_stopped_dashboard_draw_its_history() -> None:
    """Issue 23 item 8: after Restart & Run All, Details opened on a stopped dashboard showed
    await, busy and time-lost charts with no axes and no lines."""
    dash, sampler = make(details=False)
    root = path_state("/data", "/data", "xfs", 100 * GIB, 40 * GIB)
    feed(dash, sampler, [sample(i, {"/data": root}) for i in range(5)])
    dash.stop("stopped")
    dash.details_button.value = True
    for name in ("await", "util"):
        chart = dash.charts[name]
        assert chart.points == 5 and chart.x_axis.visible and chart.y_axis.visible, name
    dash.close()
