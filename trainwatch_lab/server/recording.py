"""The Jupyter server's recorder (issue 27): what the server's sampler sees, kept on disk.

On by default (``c.TrainWatch.record``). While recording, the server holds its sampler's
lease from the start, as the notifier does, so a training run is recorded with no panel
open. Numbers are kept only while something is worth recording (a training process, a
busy kernel, a path a user added, a warning) and for ``RECORD_TAIL_S`` after, so the end of
a run is there: every ``record_look_every_s`` (1 s) while someone looks, every
``record_every_s`` (10 s) otherwise. Events (warnings, kernels, processes) are kept always.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from ..core.model import Sample
from ..core.record import Recorder, choose

log = logging.getLogger(__name__)
RECORD_TAIL_S = 300.0  # numbers go on this long after the last thing worth recording


class ServerRecording:
    """A Sampler subscriber: the hub's sample to the Recorder, at the pace of who looks."""

    def __init__(self, hub: Any, path: str) -> None:
        config = hub.config
        self.hub = hub
        defaults = replace(
            hub.defaults,
            record_every_s=config.record_every_s,
            record_look_every_s=config.record_look_every_s,
            record_keep_s=config.record_keep_days * 86_400.0,
            record_max_bytes=int(config.record_max_mb * 2**20),
        )
        self.recorder = Recorder(path, role="jupyter-server", every=self.every, defaults=defaults)
        if hub.notifier is not None:  # what the webhook was told, on the timeline
            hub.notifier.on_sent = self.recorder.notified(hub.notifier.fmt)
        self._worth_until = -float("inf")

    def every(self) -> float:
        d = self.recorder.defaults
        return d.record_look_every_s if self.hub.looking else d.record_every_s

    def worth(self, sample: Sample) -> bool:
        roles = self.hub.paths.roles()
        return bool(
            sample.processes
            or any(k.get("execution_state") == "busy" for k in sample.kernels.values())
            or any("user" in r for r in roles.values())
            or any(a.severity != "info" for a in sample.warnings)
        )

    def __call__(self, sample: Sample) -> None:  # sampler thread
        self.recorder.start()  # (idempotent) a hub that never samples has no thread
        if self.worth(sample):
            self._worth_until = sample.t + RECORD_TAIL_S
        self.recorder(sample, values=sample.t <= self._worth_until)

    def close(self) -> None:
        self.recorder.close()


def recording_for(hub: Any) -> ServerRecording | None:
    """The server's recording, or None when ``c.TrainWatch.record`` is off or no local
    directory can hold the history (one line in the log says why)."""
    config = hub.config
    if not config.record:
        return None
    try:
        where = choose(explicit_file=config.record_path or None)
    except LookupError as exc:
        log.warning("trainwatch: recording off: %s", exc)
        return None
    for note in where.notes:
        log.warning("trainwatch: %s; the history goes to %s", note, where.path)
    log.info("trainwatch: recording the history to %s", where.path)
    return ServerRecording(hub, where.path)
