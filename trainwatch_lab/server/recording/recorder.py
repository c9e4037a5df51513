"""The Jupyter server's recorder (issue 27): what the server's sampler sees, kept on disk.

On by default (``c.TrainWatch.record``). The recording holds the server's sampler's lease
from the start, as the notifier does, so a training run is recorded with no panel open.
Numbers are kept only while something is worth recording (a training process, a busy
kernel, a path a user added, a warning, a panel open) and for ``record_tail_s`` after, so
the end of a run is there: every ``record_look_every_s`` (1 s) while someone looks, every
``record_every_s`` (10 s) otherwise. Events (warnings, kernels, processes) are kept always.

When nothing has been worth recording for that long (and the sampler ran at least
``record_idle_after_s``), the recording lets go of the lease, so an idle server costs
nothing: the hub stops the sampler, and every ``record_idle_check_s`` looks for a training
process (one procfs pass of core.processes.discovery's Scanner, on a worker thread) or a busy kernel
(the kernel manager's own table). What it finds, or a sample that shows something worth
recording while a panel keeps the sampler running, takes the lease again; so does a kernel
started or ended meanwhile, for the ``record_idle_after_s`` its events need. Both moments are
events on the timeline (``recording-idle``, ``recording-resumed``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from ...core.model import Sample
from ...core.processes.discovery import Scanner
from ...core.record import Event, Recorder, choose
from ..kernel_requests import KernelRequests
from ..kernels import kernel_pids

log = logging.getLogger(__name__)


class ServerRecording:
    """A Sampler subscriber: the hub's sample to the Recorder, at the pace of who looks."""

    def __init__(self, hub: Any, path: str) -> None:
        config = hub.config
        self.hub = hub
        defaults = replace(
            hub.defaults,
            record_every_s=config.record_every_s,
            record_look_every_s=config.record_look_every_s,
            record_tail_s=config.record_tail_s,
            record_idle_after_s=config.record_idle_after_s,
            record_idle_check_s=config.record_idle_check_s,
            record_keep_s=config.record_keep_days * 86_400.0,
            record_max_bytes=int(config.record_max_mb * 2**20),
        )
        # a shutdown or restart asked of the kernel manager: its kernel's end says so
        self.requests = KernelRequests.of(hub.kernel_manager)
        self.recorder = Recorder(
            path,
            role="jupyter-server",
            every=self.every,
            defaults=defaults,
            kernel_asked=self.requests.take,
        )
        if hub.notifier is not None:  # what the webhook was told, on the timeline
            hub.notifier.on_sent = self.recorder.notified(hub.notifier.fmt)
        self._worth_until = -float("inf")
        self.holding = False  # the recording holds the sampler's lease (hub: on the loop)
        self.idle_stop = bool(config.record_idle_stop)
        self._awake_since: float | None = None  # the first sample's time since it took it
        self._asked = False  # a change of hold was asked of the loop and not yet done
        self._scanner = Scanner()  # the idle look's passes (links remembered between them)
        self.checks = 0  # idle looks done (tests, diagnostics)
        self.kernels_seen: set[int] = set()  # the kernels' pids in the last sample

    def every(self) -> float:
        d = self.recorder.defaults
        return d.record_look_every_s if self.hub.looking else d.record_every_s

    def user_paths(self) -> bool:
        return any("user" in r for r in self.hub.paths.roles().values())

    def worth(self, sample: Sample) -> str | None:
        """What in ``sample`` is worth recording, in words (None: nothing)."""
        if sample.processes:
            row = sample.processes[0]
            return f"training process found: pid {row.pid} `{row.command}`"
        busy = next(
            (k for k, v in sample.kernels.items() if v.get("execution_state") == "busy"), None
        )
        if busy is not None:
            return f"kernel {busy} is busy"
        if self.user_paths():
            return "a path was added"
        if self.hub.looking:
            return "a panel is open"
        warned = next((a for a in sample.warnings if a.severity != "info"), None)
        return f"{warned.code} on {warned.subject}" if warned is not None else None

    def __call__(self, sample: Sample) -> None:  # sampler thread
        self.recorder.start()  # (idempotent) a hub that never samples has no thread
        worth = self.worth(sample)
        self.kernels_seen = {k["pid"] for k in sample.kernels.values() if k.get("pid")}
        if worth is not None:
            self._worth_until = sample.t + self.recorder.defaults.record_tail_s
        self.recorder(sample, values=sample.t <= self._worth_until)
        if self.idle_stop:
            self._pace(sample.t, worth)

    def _pace(self, t: float, worth: str | None) -> None:  # sampler thread
        """Ask the loop to let go of the lease when idle long enough, or to take it again
        when a sample (of a sampler a panel keeps running) shows something worth it."""
        if self._asked:
            return
        if self.holding:
            if self._awake_since is None:
                self._awake_since = t
            quiet_from = max(
                self._awake_since + self.recorder.defaults.record_idle_after_s, self._worth_until
            )
            if t >= quiet_from:
                self._ask(self.hub.recording_idle)
        elif worth is not None:
            self._ask(self.hub.recording_wake, worth)

    def _ask(self, fn: Any, *args: Any) -> None:
        loop = self.hub.loop
        if loop is None:
            return
        self._asked = True
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(fn(*args)))

    def took(self, holding: bool, why: str | None) -> None:  # event loop
        """The hub took (or let go of) the lease for the recording: on the timeline
        (``why`` None: the server's start, no event)."""
        self._asked = False
        if holding == self.holding:
            return
        self.holding = holding
        self._awake_since = None
        if why is None:
            return
        d = self.recorder.defaults
        if holding:
            text = f"recording resumed: {why}"
        else:
            text = (
                "recording idle: nothing worth recording (no training process, busy kernel, "
                "added path, warning or open panel); the sampler stops and looks for "
                f"training every {d.record_idle_check_s:.0f} s"
            )
        kind = "recording-resumed" if holding else "recording-idle"
        self.recorder.add_event(
            Event(time.time(), kind, self.recorder.path, text, {"reason": "idle", "why": why})
        )

    def busy_kernel(self) -> str | None:  # event loop: the kernel manager's table only
        manager = self.hub.kernel_manager
        if manager is None:
            return None
        for kid in list(manager.list_kernel_ids()):
            try:
                state = getattr(manager.get_kernel(kid), "execution_state", None)
            except KeyError:
                continue
            if state == "busy":
                return f"kernel {kid} is busy"
        return None

    def kernel_change(self) -> str | None:  # event loop: the kernel manager's table only
        """A kernel started or ended since the last sample: the sampler runs a while, so
        the timeline has it (kernel-started, kernel-ended with how it ended)."""
        now = kernel_pids(self.hub.kernel_manager)
        if now - self.kernels_seen:
            return "a kernel started"
        if self.kernels_seen - now:
            return "a kernel ended"
        return None

    def training_process(self) -> str | None:  # a worker thread: one procfs pass
        """A training process on this machine (not a kernel's, not hidden), if any."""
        if not self.hub.config.watch_processes:
            return None
        found = self._scanner.scan(skip_trees=kernel_pids(self.hub.kernel_manager))
        hidden = self.hub.hidden_processes()
        for item in found.found.values():
            if item.key not in hidden:
                return f"training process found: pid {item.pid} `{item.command}`"
        return None

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
