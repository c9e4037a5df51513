"""Skip-or-fail policy: tests that need root or FUSE skip on a laptop, but fail under CI."""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, reason: str) -> None:
    """Skip with ``reason`` unless running under CI, where a missing prerequisite is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def need_root(reason: str = "needs root to mount filesystems") -> None:
    """Root or skip (fail under CI); tests/support/tiers.py marks its callers ``root``."""
    need(os.geteuid() == 0, reason)


def need_tool(name: str) -> str:
    path = shutil.which(name)
    need(path is not None, f"needs `{name}` on PATH")
    return path or name
