"""One mirror per share directory: a lock file there names the holder (host, process, local
directory), so a second mirror of the same destination, from this host or another, is
refused instead of tearing the first one's files.

The file (``.trainwatch-mirror-share.lock``, never a copied name) is created exclusively by
the guard's helper (core.worker.files.op_claim_share) and refreshed while the mirror runs;
its holder releases it at ``close``. One left by a process that died is taken over: at once
when that process was on this host (same hostname, boot and pid namespace: two containers
with one hostname are two hosts), else once it was not refreshed for
``DEFAULTS.mirror_lock_stale_s``.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

from ...core.defaults import DEFAULTS
from ...core.identity import process_home
from ...core.paths.names import printable
from .plan import SHARE_LOCK, TMP_PREFIX


class ShareInUse(ValueError):
    """Another mirror copies into this share directory."""


class ShareLock:
    """This mirror's claim on ``share`` (what the helper writes, and what a refusal says)."""

    def __init__(self, share: str, local: str) -> None:
        self.path = os.path.join(share, SHARE_LOCK)
        self.share = share
        self.holder: dict[str, Any] = {
            **process_home(),  # host, boot id, pid namespace: where "pid" means something
            "pid": os.getpid(),
            "token": secrets.token_hex(16),
            "local": local,
            "since": time.time(),
        }

    def claim_args(self, live: list[str]) -> dict[str, Any]:
        """The helper's arguments; ``live`` the tokens of this process's open mirrors (a
        lock of this process that is not among them was left by a close on a hung share)."""
        return {
            "path": self.path,
            "holder": self.holder,
            "stale_s": DEFAULTS.mirror_lock_stale_s,
            "live": live,
            "tmp_prefix": TMP_PREFIX,
        }

    def release_args(self) -> dict[str, Any]:
        return {"path": self.path, "token": self.holder["token"]}

    def refusal(self, answer: dict[str, Any]) -> str:
        """One line: who mirrors into the share already, and what to do."""
        holder = answer.get("holder") or {}
        who = f"process {holder.get('pid', '?')} on {holder.get('host', '?')}"
        if holder.get("local"):
            who += f" (from {printable(str(holder['local']))})"
        return (
            f"another mirror copies into {printable(self.share)}: {who}; close it first, or "
            f"give each run its own share directory (the lock is {printable(self.path)})"
        )
