"""Word from training code while nobody looks: ``notify_to(url)`` sends what the saves say
(a checkpoint paused for space, resumed, or sent to the fallback) to a webhook, in the
formats of ``%trainwatch --notify`` (advice.notify). A notebook with ``--notify`` does this
already; a script or a framework callback calls it once.
"""

from __future__ import annotations

from ..advice.notify import Notifier, make_notifier
from ..core.defaults import DEFAULTS
from ..fix.report import add_channel, remove_channel

__all__ = ["notify_to", "stop_notifying"]


def notify_to(url: str, fmt: str = "json") -> Notifier:
    """A Notifier for ``url`` that hears every warning training code raises itself (until
    ``stop_notifying``); ValueError (one line) for a bad URL or format."""
    notifier = make_notifier(url, fmt)
    if notifier is None:
        raise ValueError("notify_to needs an http:// or https:// webhook URL")
    add_channel(notifier.send)
    return notifier


def stop_notifying(notifier: Notifier, timeout: float = DEFAULTS.notify_timeout_s) -> None:
    """No more messages to ``notifier``; those queued get ``timeout`` seconds to go out."""
    remove_channel(notifier.send)
    notifier.flush(timeout)
    notifier.close(timeout=0)
