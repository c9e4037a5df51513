"""``%trainwatch --notify URL``: a bad target is one UsageError that changes nothing; a good
one follows the kernel's sampler (started with it, closed with it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from tests.advice.test_notify import Webhook
from trainwatch_lab.notebook.magics import state_for
from trainwatch_lab.notebook.options import parse_options

from .conftest import wait_for


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("--notify ftp://x/y", "--notify takes an http:// or https:// webhook URL"),
        ("--notify https://x/y --notify-format teams", "--notify-format must be one of"),
        ("--notify-format teams", "--notify-format must be one of"),
        ("--notify", "--notify needs a value"),
    ],
)
def test_bad_notify_options_are_one_usage_error(line: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as info:
        parse_options(line)
    assert "\n" not in str(info.value)


def test_bad_notify_changes_nothing(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    state = state_for(shell)
    before = state.dashboard
    with pytest.raises(UsageError):
        shell.run_line_magic("trainwatch", f"{tmp_path} --notify file:///etc/passwd")
    assert state.dashboard is before and state.notifier is None
    assert before.sampler.running


def test_the_notifier_lives_with_the_dashboard(shell: Any, tmp_path: Path) -> None:
    hook = Webhook()
    try:
        line = f"{tmp_path} --interval 0.2 --no-probe --notify {hook.url} --notify-format slack"
        shell.run_line_magic("trainwatch", line)
        state = state_for(shell)
        notifier = state.notifier
        assert notifier is not None and notifier.fmt == "slack"
        assert state.options.notify_url == hook.url
        wait_for(lambda: state.dashboard.samples >= 1, what="first sample")
        shell.run_line_magic("trainwatch", "stop")
        assert state.notifier is None
        wait_for(lambda: not notifier._thread.is_alive(), what="notifier thread ends")
    finally:
        hook.close()


def test_the_notifier_hears_a_save_paused_for_space_while_it_lives(
    shell: Any, tmp_path: Path
) -> None:
    """Issue 38: what training code says itself (fix.report.notify: a checkpoint paused for
    space) reaches ``--notify``'s webhook while the dashboard lives, and no longer after."""
    from trainwatch_lab.core.model import Alert
    from trainwatch_lab.fix.report import notify

    hook = Webhook()
    try:
        line = f"{tmp_path} --interval 0.2 --no-probe --notify {hook.url}"
        shell.run_line_magic("trainwatch", line)
        paused = Alert("checkpoint-wont-fit", "critical", str(tmp_path), "paused", "free")
        assert notify(paused) == 1
        wait_for(lambda: len(hook.requests) >= 1, what="the pause delivered")
        assert b'"checkpoint-wont-fit"' in hook.requests[-1]["body"]
        shell.run_line_magic("trainwatch", "stop")
        assert notify(paused) == 0
    finally:
        hook.close()
