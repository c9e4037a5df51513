"""Per-path memory of the paths source between ticks, and when a path's next probe and
checkpoint scan are due."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..defaults import Defaults
from ..model import CheckpointInfo, ProbeResult
from ..storage.quota import binding

# what identifies the filesystem a path's facts were measured on: mount id, st_dev, mountpoint
# (an id alone is reused once a mount is gone)
MountKey = tuple[int, int, str]

CHECKPOINT_RESCAN_S = 10.0  # a directory listing per tick would be wasteful on a share
# Where the directory's mtime is known each tick (paths looked at locally), a directory
# that has not changed is rescanned only this long after its last change (the newest
# checkpoint may still be growing) and then every CHECKPOINT_IDLE_RESCAN_S: saves land
# below the watched directory (lightning_logs/version_0/checkpoints/, HF's checkpoint-N/)
# without touching its mtime, and a new save must not go unseen for long.
CHECKPOINT_SETTLE_S = 60.0
CHECKPOINT_IDLE_RESCAN_S = 30.0
PROBE_RETRY_S = 10.0  # a failed probe is retried this soon, not after probe_every_s
# a filesystem that answered "no quota" is asked again this much later (quotas turned on)
QUOTA_RECHECK_S = 60.0


@dataclass
class Watch:
    """Per-path memory between ticks."""

    key: str
    mount: MountKey | None = None  # the filesystem the probe and checkpoints below are of
    owner: int | None = None  # the process whose writes the quota charges (None: ours)
    # watched because someone asked (a user, a kernel): probed there; a directory found on
    # the machine (a training process's) is probed only when it is our user's (issue 24)
    requested: bool = True
    real: str | None = None  # resolved path from the last answer (symlinks followed)
    probe: ProbeResult | None = None
    probe_at: float | None = None
    probe_thread: threading.Thread | None = None
    checkpoints: CheckpointInfo | None = None
    checkpoints_at: float | None = None
    dir_mtime: int | None = None  # st_mtime_ns at the last local look (None: not known)
    dir_changed_at: float = 0.0  # when that mtime last changed (monotonic)
    scanned_mtime: int | None = None  # st_mtime_ns when the last scan started
    scan_thread: threading.Thread | None = None
    asked: Future[None] | None = None  # the guarded inspect of the latest tick that asked
    quota_none_until: float = 0.0  # (monotonic) no quota here: not asked again before then
    quota_note: str | None = None  # "no quota" said once: the next sample's notes carry it
    quota_said: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def own(self, owner: int | None) -> None:
        """A new writer: its quota, asked afresh (a "no quota" held for the last writer says
        nothing of this one's)."""
        if owner != self.owner:
            self.owner, self.quota_none_until = owner, 0.0

    def moved_to(self, mount: MountKey) -> bool:
        """The path now lives on ``mount``: what was measured on another filesystem (probe,
        checkpoints, quota) is forgotten and due again at once. True when it moved (an
        unmount, a mount over it); the first call only records where it is."""
        with self.lock:
            if mount == self.mount:
                return False
            moved, self.mount = self.mount is not None, mount
            if moved:
                self.probe = self.probe_at = None
                self.checkpoints = self.checkpoints_at = self.scanned_mtime = None
                self.quota_none_until, self.quota_said = 0.0, False
            return moved

    def quota_from(self, answer: dict[str, Any] | None, mountpoint: str) -> dict[str, Any] | None:
        """The quota that binds in ``answer`` (core.storage.quota.binding), None without one: also
        when
        not asked this time or the tool has not answered yet (a later tick reads it). "No
        quota" holds the path for QUOTA_RECHECK_S and is said once (``quota_note``)."""
        if answer is None or answer.get("pending"):
            return None
        quota = binding(answer, mountpoint)
        if quota is None:
            self.quota_none_until = time.monotonic() + QUOTA_RECHECK_S
            if not self.quota_said:
                self.quota_said = True
                self.quota_note = f"no quota on {mountpoint}: {answer.get('none')}"
        return quota

    def probe_due(self, d: Defaults, local: bool) -> bool:
        """Whether to start a probe now: none running, and the last one old enough (soon
        again after a failed one)."""
        with self.lock:
            if self.probe_thread is not None and self.probe_thread.is_alive():
                return False
            if self.probe_at is None:
                return True
            every = d.local_probe_every_s if local else d.probe_every_s
            if self.probe is not None and self.probe.error is not None:
                every = min(every, PROBE_RETRY_S)  # e.g. the mount was dead: look again soon
            return time.monotonic() - self.probe_at >= every

    def scan_due(self) -> bool:
        """Caller holds ``self.lock``. See CHECKPOINT_SETTLE_S for the quiet directory."""
        if self.scan_thread is not None and self.scan_thread.is_alive():
            return False
        at = self.checkpoints_at
        if at is None:
            return True
        now = time.monotonic()
        if now - at < CHECKPOINT_RESCAN_S:
            return False
        if self.dir_mtime is None or self.dir_mtime != self.scanned_mtime:
            return True
        return (
            now - self.dir_changed_at < CHECKPOINT_SETTLE_S or now - at >= CHECKPOINT_IDLE_RESCAN_S
        )
