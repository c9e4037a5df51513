"""Which alerts go inline and when: once per condition, only while a cell runs, re-armed only
after the condition has been gone a while; the fix as code for the object a variable names,
and warnings from framework callbacks. (Where they land in a real kernel, ipykernel 6 and 7,
is test_kernel.py.)"""

from __future__ import annotations

import logging
from typing import Any

from trainwatch_lab.core.model import Alert, Sample
from trainwatch_lab.fix import report as fix_report
from trainwatch_lab.notebook.inline import (
    CellTracker,
    InlineAlerts,
    attach,
    current_parent,
    detach,
)
from trainwatch_lab.notebook.warnings_html import ALERT_MIME, alerts_bundle


def alert(code: str, subject: str = "/data", severity: str = "warning") -> Alert:
    return Alert(code, severity, subject, f"{code} on {subject}: 97 % used", "free space")  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[list[str], Any]] = []

    def __call__(
        self, bundle: dict[str, Any], parent: Any, display_id: Any = None, update: bool = False
    ) -> bool:
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


# -- the fix as code, and warnings from framework callbacks --------------------------------
class Bundles:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(
        self, bundle: dict[str, Any], parent: Any, display_id: Any = None, update: bool = False
    ) -> bool:
        self.sent.append(bundle)
        return True


def summary_writer(logdir: str) -> Any:
    """An object shaped and named like tensorboardX's SummaryWriter (no import needed)."""
    cls = type("SummaryWriter", (), {"__module__": "tensorboardX.writer"})
    obj = cls()
    obj.logdir = logdir
    return obj


def test_an_alert_carries_the_fix_as_code_for_the_object_found(ipshell: Any) -> None:
    share = "/mnt/share/runs/exp1"
    tracker = CellTracker(ipshell)
    sent = Bundles()
    inline = InlineAlerts(tracker, sent)
    ipshell.user_ns["writer"] = summary_writer(share)
    try:
        inline.learn()  # post_run_cell of the cell that made the writer
        tracker.pre()
        inline.on_sample(Sample(t=1, warnings=[alert("shared-mount", share), alert("gpu-stalled")]))
        tracker.post()
    finally:
        ipshell.user_ns.pop("writer", None)
    (bundle,) = sent.sent
    code = (
        "from trainwatch_lab.fix import local_mirror\n"
        'writer = SummaryWriter(local_mirror("/mnt/share/runs/exp1"))'
    )
    items = bundle[ALERT_MIME]["alerts"]
    assert [i["fix_code"] for i in items] == [code, None]
    text = bundle["text/plain"]
    assert "Fix as code:\n    from trainwatch_lab.fix import local_mirror\n    writer = " in text
    html = bundle["text/html"]
    assert html.count('class="tw-fix-code"') == 1 and "navigator.clipboard.writeText" in html
    assert "writer = SummaryWriter(local_mirror(&quot;/mnt/share/runs/exp1&quot;))" in html
    assert (
        html.index('data-code="shared-mount"')
        < html.index("tw-fix-code")
        < html.index('data-code="gpu-stalled"')
    )  # the code block follows its own alert


def test_one_cause_gets_its_code_once(ipshell: Any) -> None:
    """shared-mount and slow-mount on one share both carried the same local_mirror block
    (issue 36): the first carries it."""
    share = "/mnt/share/runs/exp1"
    inline = InlineAlerts(CellTracker(ipshell), Bundles())
    ipshell.user_ns["writer"] = summary_writer(share)
    try:
        inline.learn()
    finally:
        ipshell.user_ns.pop("writer", None)
    bundle = inline.bundle([alert("shared-mount", share), alert("slow-mount", share)])
    codes = [i["fix_code"] for i in bundle[ALERT_MIME]["alerts"]]
    assert codes[0] and "local_mirror" in codes[0] and codes[1] is None
    assert bundle["text/html"].count('class="tw-fix-code"') == 1
    assert bundle["text/plain"].count("Fix as code:") == 1


class Bundled(Recorder):
    """Keeps each bundle's fix codes."""

    def __init__(self) -> None:
        super().__init__()
        self.codes: list[list[str | None]] = []

    def __call__(
        self, bundle: dict[str, Any], parent: Any, display_id: Any = None, update: bool = False
    ) -> bool:
        self.codes.append([a.get("fix_code") for a in bundle[ALERT_MIME]["alerts"]])
        return super().__call__(bundle, parent, display_id, update)


def test_one_cause_gets_its_code_once_under_a_cell_across_ticks(ipshell: Any) -> None:
    """slow-mount needs two slow probes, so it comes a tick after shared-mount, in a display
    of its own: it carried the same local_mirror block again (issue 36 item 1). A later
    cell, where the first block is out of sight, gets it again."""
    share = "/mnt/share/runs/exp1"
    tracker, rec = CellTracker(ipshell), Bundled()
    inline = InlineAlerts(tracker, rec, rearm_after_s=30)
    ipshell.user_ns["writer"] = summary_writer(share)
    try:
        inline.learn()
        ipshell.parent_header = {"header": {"msg_id": "the-cell"}}  # as ipykernel sets it
        tracker.pre()
        inline.on_sample(Sample(t=1, warnings=[alert("shared-mount", share)]))
        both = [alert("shared-mount", share), alert("slow-mount", share)]
        inline.on_sample(Sample(t=2, warnings=both))
        tracker.post()
        ipshell.parent_header = {"header": {"msg_id": "a-later-cell"}}
        tracker.pre()
        inline.on_sample(Sample(t=100, warnings=[alert("slow-mount", share)]))  # re-armed
        tracker.post()
    finally:
        ipshell.user_ns.pop("writer", None)
        del ipshell.parent_header
    assert [codes for codes, _ in rec.sent] == [["shared-mount"], ["slow-mount"], ["slow-mount"]]
    first, second, later = rec.codes
    assert first[0] and "local_mirror" in first[0]
    assert second == [None] and later == first


def test_no_local_mirror_code_for_a_writer_moved_onto_it(ipshell: Any) -> None:
    """The writer was made again as SummaryWriter(local_mirror(share)): the share's
    mount-unresponsive still offered it the local_mirror line (issue 36)."""
    share = "/mnt/share/runs/exp1"
    inline = InlineAlerts(CellTracker(ipshell), Bundles())
    try:
        ipshell.user_ns["writer"] = summary_writer(share)
        inline.learn()
        assert inline.fix_codes([alert("mount-unresponsive", share)])[0]
        ipshell.user_ns["writer"] = summary_writer("/tmp/trainwatch-mirror/exp1")
        inline.learn()  # the cell that moved it onto local_mirror(share)
        assert inline.fix_codes([alert("mount-unresponsive", share)]) == [None]
        ipshell.user_ns["other"] = summary_writer(share)
        inline.learn()
        del ipshell.user_ns["other"]
        inline.learn()  # ``del other``: what it named goes too
        assert inline.fix_codes([alert("mount-unresponsive", share)]) == [None]
    finally:
        ipshell.user_ns.pop("writer", None)
        ipshell.user_ns.pop("other", None)


def test_no_fix_code_leaves_the_bundle_as_it_was(ipshell: Any) -> None:
    inline = InlineAlerts(CellTracker(ipshell), Bundles())
    alerts = [alert("disk-almost-full", "/data")]
    assert inline.bundle(alerts) == alerts_bundle(alerts)


def test_framework_callbacks_report_under_the_running_cell(ipshell: Any, caplog: Any) -> None:
    inline = attach(ipshell)
    assert inline is not None
    sent = Bundles()
    inline.publish = sent
    try:
        # attach() counts the cell that loads it as running: a callback in trainer.fit()
        assert fix_report.report([alert("shared-mount", "/mnt/share/logs")])
        assert len(sent.sent) == 1
        assert fix_report.report([alert("shared-mount", "/mnt/share/logs")])  # seen: not again
        assert len(sent.sent) == 1
    finally:
        detach(ipshell)
    with caplog.at_level(logging.WARNING, logger="trainwatch_lab"):
        assert not fix_report.report([alert("disk-filling", "/ckpt")])  # no notebook: a log line
    assert "trainwatch [disk-filling] disk-filling on /ckpt" in caplog.text


class Displays:
    """A kernel's outputs as a front end keeps them: each display id's latest bundle."""

    def __init__(self) -> None:
        self.shown: dict[str, dict[str, Any]] = {}
        self.updates = 0

    def __call__(
        self, bundle: dict[str, Any], parent: Any, display_id: Any = None, update: bool = False
    ) -> bool:
        assert display_id and (display_id in self.shown) == update
        self.updates += update
        self.shown[display_id] = bundle
        return True

    def codes(self) -> list[list[str]]:
        return [[a["code"] for a in b[ALERT_MIME]["alerts"]] for b in self.shown.values() if b]


def test_a_summary_takes_the_place_of_the_warnings_it_lists(ipshell: Any) -> None:
    """%%trainwatch's summary lists each warning raised during the cell on a line that opens
    to its sentence and fix: the copies shown as they were raised are taken back, but only
    those the summary lists, and only under the cell it summarises."""
    tracker = CellTracker(ipshell)
    shown = Displays()
    inline = InlineAlerts(tracker, shown)
    ipshell.parent_header = {"header": {"msg_id": "earlier-cell"}}  # as ipykernel sets it
    tracker.pre()
    inline.on_sample(Sample(t=1, warnings=[alert("slow-mount", "/share")]))
    tracker.post()
    ipshell.parent_header = {"header": {"msg_id": "the-cell"}}
    tracker.pre()
    try:
        inline.on_sample(Sample(t=2, warnings=[alert("disk-filling")]))
        inline.on_sample(
            Sample(t=3, warnings=[alert("disk-almost-full"), alert("gpu-stalled", "0")])
        )
        assert shown.codes() == [
            ["slow-mount"],
            ["disk-filling"],
            ["disk-almost-full", "gpu-stalled"],
        ]
        assert inline.withdraw([("disk-filling", "/data"), ("disk-almost-full", "/data")]) == 2
        assert shown.codes() == [["slow-mount"], ["gpu-stalled"]]  # the rest stays
        assert inline.withdraw([("gpu-stalled", "0")]) == 0  # each cell's displays once
    finally:
        tracker.post()
        del ipshell.parent_header


def test_the_cell_tracker_knows_when_the_cell_began(ipshell: Any) -> None:
    from trainwatch_lab.notebook.inline import CellTracker

    tracker = CellTracker(ipshell)
    assert tracker.started_at() is None
    tracker.pre()
    began = tracker.started_at()
    tracker.pre()  # %%trainwatch runs its body as a nested cell: the same cell
    assert began is not None and tracker.started_at() == began
    tracker.post()
    tracker.post()
    assert tracker.started_at() is None
