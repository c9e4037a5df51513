"""The kernel's views of one moment tell the same story (issue 23, item 3).

``%trainwatch status``, the dashboard's header and its warnings pane read the sampler's
latest sample. The tick in progress sits in the history before the Advisor judged it (its
warnings still empty), so a view read then said "no warnings" while the others showed them.
Here the Advisor of a real sampler is held mid-evaluation (an Event, not a sleep) while a
real tmpfs is almost full, and every view is read at that moment.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from trainwatch_lab.notebook.magics import state_for

from .conftest import wait_for
from .test_magics import fill_leaving


def codes(sample: Any) -> set[str]:
    return {a.code for a in sample.warnings} if sample is not None else set()


class HeldAdvisor:
    """Wraps a sampler's ``evaluate``: once armed, the next evaluation waits for release."""

    def __init__(self, evaluate: Any) -> None:
        self.evaluate = evaluate
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, sample: Any, history: Any) -> Any:
        if self.armed:
            self.armed = False
            self.entered.set()
            self.release.wait(60)
        return self.evaluate(sample, history)


def test_status_and_dashboard_read_a_judged_sample_while_the_next_is_judged(
    shell: Any, tmpfs_mount: Any
) -> None:
    full = Path(tmpfs_mount("8m").path)
    fill_leaving(full, 0.005)  # under 1 % free: a critical disk-almost-full
    shell.run_line_magic("trainwatch", f"{full} --interval 0.1 --no-probe")
    state = state_for(shell)
    dash = state.dashboard
    wait_for(lambda: "disk-almost-full" in codes(dash.sampler.latest), what="disk-almost-full")
    held = HeldAdvisor(dash.sampler.evaluate)
    dash.sampler.evaluate = held
    held.armed = True
    try:
        assert held.entered.wait(30), "the sampler never evaluated again"
        # the tick being judged is in the history now, with no warnings yet
        assert dash.sampler.history.latest.warnings == []
        status = state.status()
        dash.pause()  # the paused header is drawn from sampler.latest at once
        header = dash.status.value
    finally:
        held.release.set()
    assert "CRITICAL [disk-almost-full]" in status, status
    assert "this notebook's 1 path: 1 warning" in status, status
    assert "no warnings" not in status
    assert "data-level='critical'" in header, header
