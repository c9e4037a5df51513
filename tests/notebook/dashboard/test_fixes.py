"""The dashboard's lines for issues 13, 15 and 17: the time lost to storage in the verdict and
stacked by path in its chart, and the fixes at work (real log mirrors, a real background
checkpoint save) in one quiet line each, bounded beside the running cell."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import PathState, ProcessIO, Sample
from trainwatch_lab.fix import checkpoint_status, save_checkpoint
from trainwatch_lab.fix.checkpoint import background
from trainwatch_lab.fix.mirror.mirror import Mirror
from trainwatch_lab.notebook import fix_status
from trainwatch_lab.notebook.dashboard.bqcharts import Series, stack
from trainwatch_lab.notebook.dashboard.view import (
    MAX_MIRROR_LINES,
    HeaderState,
    fixes_html,
    header_html,
    save_text,
)
from trainwatch_lab.notebook.warnings_html import esc

from .test_widget import feed, make, notebook_state

__all__ = ["notebook_state"]  # fixture
T0 = 1_700_000_000.0
SHARE, DATA = "/mnt/share/runs", "/data"


def waits_sample(i: int, share: float, data: float = 0.0, workers: float = 0.0) -> Sample:
    s = Sample(t=T0 + i)
    s.paths = {p: PathState(path=p, exists=True) for p in (SHARE, DATA)}
    s.process = ProcessIO(pid=42, pids=1, read_chars_s=0, write_chars_s=0, read_bytes_s=0,
                          write_bytes_s=0)  # fmt: skip
    s.process.waits = {SHARE: share, DATA: data}
    s.process.wait_calls = {SHARE: {"fsync": share}} if share else {}
    s.process.worker_waits = {DATA: workers}
    return s


# -- time lost to storage (issue 15) -----------------------------------------------------------


def test_the_verdict_says_the_time_lost_in_the_headline_s_words() -> None:
    """The header shows the headline's facts, the time lost among them (advice.io_bound's
    words, io-bound's window): the dashboard makes no words of its own for it."""
    history = History(capacity=600)
    samples = [waits_sample(i, 0.4 if i % 2 else 0.0, data=0.01) for i in range(21)]
    for s in samples:
        history.append(s)
    html = header_html(samples[-1], HeaderState("live", 21, 20, 1.0, 600.0), history)
    assert "20 % waiting on /mnt/share/runs (fsync)</span>" in html
    unmeasured = Sample(t=T0)
    assert "waiting" not in header_html(unmeasured, HeaderState("live", 1, 0, 1.0, 600.0))


def test_the_waits_chart_stacks_the_paths_and_draws_the_workers_apart(
    notebook_state: Path,
) -> None:
    dash, sampler = make(details=False)
    feed(dash, sampler, [waits_sample(i, 0.3, data=0.1, workers=0.6) for i in range(5)])
    assert "30 % waiting on /mnt/share/runs (fsync)" in dash.status.value
    assert "waits" not in dash.charts  # under Details, made when opened
    dash.details_button.value = True
    chart = dash.charts["waits"]
    assert chart.figure in dash.more_grid.children
    assert list(chart.lines.labels) == ["/data", "/mnt/share/runs", "/data workers"]
    y = np.asarray(chart.lines.y)
    assert y[0, -1] == pytest.approx(10.0) and y[1, -1] == pytest.approx(40.0)  # stacked
    assert y[2, -1] == pytest.approx(60.0)  # workers: their own share, not stacked
    assert list(chart.lines.fill_opacities) == [0.25, 0.25, 0.0]
    dash.close()


def test_stack_keeps_a_gap_where_nothing_was_measured() -> None:
    series = [Series("a", (), stacked=True), Series("b", (), stacked=True), Series("w", ())]
    ys = np.array([[0.1, np.nan, np.nan], [0.2, 0.3, np.nan], [0.5, 0.5, 0.5]])
    out = stack(series, ys)
    np.testing.assert_allclose(out[1], [0.3, 0.3, np.nan])
    np.testing.assert_allclose(out[2], ys[2])
    one = ys[:1]
    assert stack(series[:1], one) is one  # one stacked line: nothing to add to it


# -- the fixes at work (issues 13 and 17) ------------------------------------------------------


@pytest.fixture
def mirrors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # the last checkpoint save is process-wide: one an earlier test made would show its line
    monkeypatch.setattr(background, "_status", background.SaveStatus())
    made: list[Mirror] = []

    def new(name: str) -> Mirror:
        m = Mirror(tmp_path / f"local-{name}", tmp_path / f"share-{name}", every=60)
        made.append(m)
        return m

    yield new
    for m in made:
        m.close(10)


def test_each_mirror_is_a_line_in_its_status_words_and_the_strip_is_bounded(mirrors) -> None:
    dash, sampler = make(details=False)
    feed(dash, sampler, [waits_sample(0, 0.0)])
    assert dash.fixes.value == "" and dash.fixes.layout.display == "none"
    first = mirrors("a")
    (first / "events").write_bytes(b"x")
    assert first.sync(10)
    feed(dash, sampler, [waits_sample(3, 0.0)])  # the strip looks every 2 s
    assert dash.fixes.layout.display == "block"
    # the words of %trainwatch status (up to "last sync N s ago", a second older under load)
    words = first.status().text().partition(", last sync")[0]
    assert words.endswith("in sync (1 file") and esc(words) in dash.fixes.value
    assert "data-state='in-sync'" in dash.fixes.value
    for name in "bcd":
        mirrors(name)
    html = fixes_html(fix_status.mirror_statuses(), None)
    assert html.count("tw-mirror") == MAX_MIRROR_LINES and "and 1 more mirror<" in html
    dash.close()


def test_a_background_save_in_flight_and_the_last_ones_time(tmp_path: Path) -> None:
    gate = threading.Event()

    def slow(path: str) -> None:
        gate.wait(10)
        Path(path).write_bytes(b"w" * 1024)

    dash, sampler = make(details=False)
    handle = save_checkpoint(slow, tmp_path / "ckpt-0001.pt", background=True)
    try:
        feed(dash, sampler, [waits_sample(0, 0.0)])
        assert "saving ckpt-0001.pt in the background for" in dash.fixes.value
        assert "data-in-flight='1'" in dash.fixes.value
    finally:
        gate.set()
        handle.wait(10)
    feed(dash, sampler, [waits_sample(5, 0.0)])
    st = checkpoint_status()
    assert "the last save (ckpt-0001.pt, " in dash.fixes.value and ") took " in dash.fixes.value
    assert "data-in-flight='0'" in dash.fixes.value
    assert save_text(st) and "failed" not in save_text(st)
    dash.close()


def test_nothing_is_looked_at_where_no_fix_was_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    rooms = ("trainwatch_lab.fix.mirror", "trainwatch_lab.fix.checkpoint")
    for name in [n for n in sys.modules if n.startswith(rooms)]:
        monkeypatch.delitem(sys.modules, name)
    assert fix_status.mirror_statuses() == [] and fix_status.save_status() is None
    assert fixes_html([], None) == ""
    assert [n for n in sys.modules if n.startswith(rooms)] == []  # looking imported nothing
