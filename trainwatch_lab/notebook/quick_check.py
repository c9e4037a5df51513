"""The immediate check: what ``trainwatch-lab check`` says about new paths, shown under the cell.

``%trainwatch``, ``%%trainwatch`` and discovery (a logdir a cell just created) all check a
path the moment it is watched, before the sampler's first sample, and show what needs saying
right under the cell that asked: ``check_and_show`` is that one step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ..core.defaults import DEFAULTS, Defaults
from ..core.model import Alert
from ..core.paths.names import normalise

log = logging.getLogger(__name__)

QUICK_CHECK_S = 1.0  # the check's timeout; with its probe budget and slack, <= 2.5 s in all


def path_notes(paths: Sequence[str]) -> list[str]:
    """One line per path that needs one, as ``trainwatch-lab check`` words it: a logdir not
    created yet is watched where it will be ("not created yet; checked at /mnt/share/runs").
    The paths were accepted already (settings.check_path): a lookup that fails now only
    costs its note."""
    from ..core.paths.names import locate, printable
    from .settings import PATH_CHECK_TIMEOUT_S

    lines = []
    for path in paths:
        try:
            note = locate(path, timeout=PATH_CHECK_TIMEOUT_S).note
        except Exception:  # a dead mount: the dashboard reports it
            continue
        if note:
            lines.append(f"trainwatch: {printable(normalise(path))}: {printable(note)}")
    return lines


def immediate_alerts(
    paths: Sequence[str], probe: bool = True, defaults: Defaults = DEFAULTS
) -> list[Alert]:
    """What ``trainwatch-lab check`` says about ``paths`` (shared, slow, unresponsive, full),
    worded as the sampler words it. Runs on the main thread because the warning must land under
    *this* cell, so it is bounded: run_check's threads are abandoned at its deadline (a dead
    mount costs ~2.5 s once, a local disk a few ms)."""
    from ..advice.check import run_check

    if not paths:
        return []
    try:
        report = run_check(list(paths), probe=probe, timeout=QUICK_CHECK_S, defaults=defaults)
    except Exception:  # a bug in a check must not break the user's cell
        log.debug("trainwatch: immediate check failed", exc_info=True)
        return []
    return [a for a in report.alerts if a.severity != "info"]


def check_and_show(
    inline: Any, paths: Sequence[str], probe: bool = True, defaults: Defaults = DEFAULTS
) -> None:
    """Check ``paths`` now and show their warnings under the running cell (through ``inline``,
    the kernel's InlineAlerts, so the sampler does not show them a second time)."""
    alerts = immediate_alerts(paths, probe, defaults)
    if alerts and inline is not None:
        inline.display_here(alerts, time.time())
