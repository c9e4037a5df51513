"""The sampler source of an attached kernel: its paths, disks and GPUs are the server's.

Named ``paths`` because it stands where the paths source stands in a kernel that samples by
itself: ``add``/``remove``/``paths`` register the notebook's paths with the server, and
every tick copies, from the server's newest judged sample, this notebook's paths, the disks,
the GPUs, the notes and the sample's time (the kernel's sampler ticks when a server sample
arrives: ``make_attached_sampler``), so each view draws the server's tick at its time.
Nothing here touches a filesystem, so no helper process is ever started for watching. The
warnings the server's Advisor judged on them are kept for this notebook's scope
(``warnings``): one set of verdicts in every view.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from ..guard.guard import MountGuard, default_guard
from ..model import Alert, Sample
from ..paths.names import normalise
from .link import HubLink

GONE_NOTE = (
    "the Jupyter server's sampler is gone (the server stopped or restarted): "
    "run %trainwatch again to sample in this kernel"
)


def in_scope(alert: Alert, mine: Iterable[str], sample: Sample) -> bool:
    """Whether a warning the server judged concerns a notebook that watches ``mine``: about
    one of its paths, a path on one of their filesystems, or a device under them; warnings
    about no storage (GPUs, processes) concern every notebook."""
    mine = set(mine)
    if alert.subject in mine:
        return True
    states = [sample.paths[p] for p in mine if p in sample.paths]
    mountpoints = {s.mountpoint for s in states if s.mountpoint}
    devices = {d for s in states for d in (s.device, *s.disks) if d}
    other = sample.paths.get(alert.subject)
    if other is not None:
        return other.mountpoint in mountpoints
    if alert.subject in sample.disks or alert.subject in devices:
        return alert.subject in devices
    known_mounts = {s.mountpoint for s in sample.paths.values() if s.mountpoint}
    if alert.subject in known_mounts:
        return alert.subject in mountpoints
    return True


class HubSource:
    """See the module docstring. ``fresh()`` before a tick makes its sample a new one."""

    name = "paths"

    def __init__(self, link: HubLink, paths: Iterable[str] = ()) -> None:
        self.link = link
        self._lock = threading.Lock()
        self._paths: list[str] = []
        self._fresh_after: float | None = None
        self._relayed_t = 0.0  # the time of the last server sample relayed
        self._last_t = 0.0  # of the last sample this source filled
        self._unfollow: Callable[[], None] | None = None
        self.warnings: list[Alert] = []  # the server's, in this notebook's scope, this tick
        # what a cell's summary lists the files written with (helpers only for shares)
        self.guard: MountGuard = default_guard()
        self._paths = list(dict.fromkeys(normalise(p) for p in paths))
        link.watch(self, self._paths)  # (also with none: it reads the link until close)

    @property
    def paths(self) -> list[str]:
        with self._lock:
            return list(self._paths)

    def add(self, path: str, owner: int | None = None, requested: bool | None = None) -> str:
        key = normalise(path)
        with self._lock:
            if key in self._paths:
                return key
            self._paths.append(key)
            paths = list(self._paths)
        self.link.watch(self, paths)
        return key

    def remove(self, path: str) -> None:
        key = normalise(path)
        with self._lock:
            if key not in self._paths:
                return
            self._paths.remove(key)
            paths = list(self._paths)
        self.link.watch(self, paths)

    def follow(self, callback: Callable[[Sample], None]) -> None:
        """``callback`` on each server sample until ``close`` (the sampler's poke)."""
        self._unfollow = self.link.subscribe(callback)

    def want_fresh(self) -> None:
        """The next tick waits (its timeout) for a sample the server takes after now: the
        end of a cell sees what the cell did."""
        self._fresh_after = time.time()

    def collect(self, sample: Sample) -> None:
        after, self._fresh_after = self._fresh_after, None
        remote = self.link.latest
        if after is not None:
            remote = self.link.fresh(after, timeout=max(2.0, 2 * self.link.interval)) or remote
        if self.link.closed:  # nothing more will come: never the last sample as if new
            sample.notes[self.name] = GONE_NOTE
            remote = None
        if remote is None:
            self.warnings = []
            return
        if remote.t > self._relayed_t and remote.t > self._last_t:
            sample.t = self._relayed_t = remote.t  # the server's tick: every view shows its time
        self._last_t = sample.t = max(sample.t, self._last_t)  # (never back in time)
        mine = self.paths
        sample.paths = {p: remote.paths[p] for p in mine if p in remote.paths}
        sample.disks = dict(remote.disks)
        sample.gpus = list(remote.gpus)
        for source, note in remote.notes.items():
            sample.notes.setdefault(source, note)
        self.warnings = [a for a in remote.warnings if in_scope(a, mine, remote)]

    def close(self) -> None:
        """This dashboard's paths are no longer watched for it; the last dashboard of the
        kernel hangs up (core.attach.link: the server's sampler may stop)."""
        with self._lock:
            self._paths = []
        if self._unfollow is not None:
            self._unfollow()
        self.link.leave(self)
