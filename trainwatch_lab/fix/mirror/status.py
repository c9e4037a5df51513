"""What a mirror reports: one look, as a line for people and JSON for other surfaces."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ...core.paths.names import printable, short_path
from ..space import fmt_size


@dataclass(frozen=True)
class MirrorStatus:
    """One look at a mirror, for ``%trainwatch status``, the dashboard and the panel."""

    local: str
    share: str
    state: str  # starting | in-sync | copying | share-unresponsive | error | closed
    last_sync: float | None  # time.time() of the last round that left nothing behind
    lag_s: float  # the share lacks what was written in the last lag_s seconds (0: nothing)
    bytes_pending: int
    bytes_copied: int
    files: int
    error: str | None = None
    # the local disk filled (fix.mirror.room): bytes already copied that were released
    # locally, bytes never copied that were dropped, and the last dropped runs
    bytes_released: int = 0
    bytes_dropped: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """``mirror to …/runs/exp1: copying, 12 KiB pending, 31 s behind; LOCAL -> SHARE``:
        the state first and the share by its last two names, the full paths last, so that a
        line cut at 820 px (the dashboard's) keeps what matters (issue 36; the scratch path
        alone ran 60 characters)."""
        head = f"mirror to {printable(short_path(self.share, 2))}: "
        paths = f"; {printable(self.local)} -> {printable(self.share)}"
        return head + self._words() + self._dropped_text() + paths

    def _dropped_text(self) -> str:
        if not self.bytes_dropped:
            return ""
        runs = "; ".join(
            f"{printable(str(r.get('file')))} bytes {r.get('start')}-{r.get('end')}"
            for r in self.dropped[-3:]
        )
        return (
            f"; the local disk filled: {fmt_size(self.bytes_dropped)} of logs never copied "
            f"were dropped, the oldest first (latest: {runs}); the newest are kept"
        )

    def _words(self) -> str:
        if self.state == "share-unresponsive":
            return (
                f"share not answering ({self.error}); {fmt_size(self.bytes_pending)} kept "
                "locally, copied when it answers again"
            )
        if self.state == "error":
            return f"{self.error}; {fmt_size(self.bytes_pending)} not copied yet"
        if self.bytes_pending:
            return f"copying, {fmt_size(self.bytes_pending)} pending, {self.lag_s:.0f} s behind"
        if self.last_sync is None:
            return self.state
        ago = max(0.0, time.time() - self.last_sync)
        files = f"{self.files} file{'' if self.files == 1 else 's'}"
        what = "closed, all copied" if self.state == "closed" else "in sync"
        return f"{what} ({files}, last sync {ago:.0f} s ago)"
