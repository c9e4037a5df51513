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


def need_root() -> None:
    need(os.geteuid() == 0, "needs root to mount filesystems")


def need_tool(name: str) -> str:
    path = shutil.which(name)
    need(path is not None, f"needs `{name}` on PATH")
    return path or name
