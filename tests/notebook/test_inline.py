"""Which alerts go inline and when: once per condition, only while a cell runs, re-armed only
after the condition has been gone a while. (Where they land in a real kernel, ipykernel 6 and
7, is test_kernel.py.)"""

from __future__ import annotations

from typing import Any

from trainwatch_lab.core.model import Alert, Sample
from trainwatch_lab.notebook.inline import CellTracker, InlineAlerts, current_parent
from trainwatch_lab.notebook.summary import ALERT_MIME


def alert(code: str, subject: str = "/data", severity: str = "warning") -> Alert:
    return Alert(code, severity, subject, f"{code} on {subject}: 97 % used", "free space")  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[list[str], Any]] = []

    def __call__(self, bundle: dict[str, Any], parent: Any) -> bool:
        self.sent.append(([a["code"] for a in bundle[ALERT_MIME]["alerts"]], parent))
        return True


def make(ipshell: Any) -> tuple[CellTracker, InlineAlerts, Recorder]:
    tracker = CellTracker(ipshell)
    rec = Recorder()
    return tracker, InlineAlerts(tracker, rec, rearm_after_s=30), rec


def test_only_while_a_cell_runs_and_once_per_condition(ipshell: Any) -> None:
    tracker, inline, rec = make(ipshell)
    inline.on_sample(Sample(t=100, warnings=[alert("disk-filling")]))
    assert rec.sent == []  # idle kernel: the dashboard lists it, nothing goes to a cell
    tracker.pre()
    inline.on_sample(Sample(t=101, warnings=[alert("disk-filling")]))
    assert rec.sent == []  # the same condition, already active: not news
    inline.on_sample(Sample(t=102, warnings=[alert("disk-filling"), alert("slow-mount")]))
    inline.on_sample(Sample(t=103, warnings=[alert("disk-filling"), alert("slow-mount")]))
    assert [codes for codes, _ in rec.sent] == [["slow-mount"]]
    tracker.post()


def test_condition_rearms_after_it_was_gone(ipshell: Any) -> None:
    tracker, inline, rec = make(ipshell)
    tracker.pre()
    inline.on_sample(Sample(t=0, warnings=[alert("gpu-stalled", "GPU 0")]))
    inline.on_sample(Sample(t=10, warnings=[]))  # gone briefly (flapping threshold)
    inline.on_sample(Sample(t=20, warnings=[alert("gpu-stalled", "GPU 0")]))
    for t in range(30, 110, 10):  # still on, tick after tick
        inline.on_sample(Sample(t=t, warnings=[alert("gpu-stalled", "GPU 0")]))
    inline.on_sample(Sample(t=200, warnings=[alert("gpu-stalled", "GPU 1")]))  # other subject
    inline.on_sample(Sample(t=500, warnings=[alert("gpu-stalled", "GPU 0")]))  # back after 400 s
    assert [codes for codes, _ in rec.sent] == [["gpu-stalled"]] * 3
    assert [a.subject for a in inline.shown] == ["GPU 0", "GPU 1", "GPU 0"]
    tracker.post()


def test_info_stays_in_the_dashboard(ipshell: Any) -> None:
    tracker, inline, rec = make(ipshell)
    tracker.pre()
    inline.on_sample(Sample(t=1, warnings=[alert("gpu-unavailable", "gpu", "info")]))
    assert rec.sent == []
    tracker.post()


def test_already_shown_conditions_are_not_repeated(ipshell: Any) -> None:
    tracker, inline, rec = make(ipshell)
    inline.mark_shown([alert("shared-mount")], now=50)
    tracker.pre()
    inline.on_sample(Sample(t=51, warnings=[alert("shared-mount")]))
    assert rec.sent == []
    tracker.post()


def test_nested_cells_count_as_one(ipshell: Any) -> None:
    tracker = CellTracker(ipshell)
    tracker.pre()
    gen = tracker.generation
    tracker.pre()  # %%trainwatch running its body
    tracker.post()
    assert tracker.running and tracker.generation == gen
    tracker.post()
    assert not tracker.running and tracker.parent is None


def test_hooks_follow_real_cells(ipshell: Any) -> None:
    tracker = CellTracker(ipshell)
    tracker.register()
    try:
        ipshell.run_cell("import sys; _tw_seen = __import__('builtins')")
        assert not tracker.running
        ipshell.user_ns["_tracker"] = tracker
        ipshell.run_cell("_during = _tracker.running")
        assert ipshell.user_ns["_during"] is True
        assert not tracker.running
    finally:
        tracker.unregister()
        for name in ("_tracker", "_during", "_tw_seen"):
            ipshell.user_ns.pop(name, None)
    # a terminal shell has no parent header: alerts print instead of attaching to a message
    assert current_parent(ipshell) is None
