"""Warnings as HTML (issue 36): what a sentence quotes in backticks is set as code."""

from __future__ import annotations

from trainwatch_lab.advice.storage import LOCAL_FIX
from trainwatch_lab.core.model import Alert
from trainwatch_lab.notebook.cell.report import _warning_html
from trainwatch_lab.notebook.cell.warnings import WarningLog
from trainwatch_lab.notebook.dashboard.warnings import warning_body_html, warning_line_html
from trainwatch_lab.notebook.warnings_html import alert_html, prose_html

ALERT = Alert(
    code="mount-unresponsive",
    severity="critical",
    subject="/mnt/share",
    message="/mnt/share did not answer within 2 s.",
    fix="If it stays dead, detach it with `umount -l /mnt/share` <now>.",
)


def test_backticks_become_code_and_the_rest_stays_escaped() -> None:
    assert prose_html("run `a < b` then") == "run <code>a &lt; b</code> then"
    assert prose_html("a lone ` stays") == "a lone ` stays"


def test_no_html_surface_shows_a_backtick() -> None:
    """The inline block, the dashboard's warning and the cell summary showed them literally."""
    log = WarningLog()
    log.observe(1.0, [ALERT])
    shown = {
        "inline": alert_html(ALERT),
        "dashboard": warning_body_html(ALERT) + warning_line_html(ALERT),
        "cell": _warning_html(log.entries()[0]),
    }
    for where, html in shown.items():
        assert "`" not in html, where
        assert "<code>umount -l /mnt/share</code>" in html, where
        assert "&lt;now&gt;" in html, where


def test_the_mirror_fix_names_its_arguments_and_what_it_copies() -> None:
    """It read "trainwatch-lab mirror /tmp/runs SHARE (an rsync every few minutes, without
    re-sending growing files)": which is local, which is the share, and no rsync is run."""
    assert "`trainwatch-lab mirror LOCAL_DIR SHARE_DIR`" in LOCAL_FIX
    assert "rsync" not in LOCAL_FIX and "/tmp/runs SHARE" not in LOCAL_FIX
