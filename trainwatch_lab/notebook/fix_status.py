"""What this kernel's fixes (local_mirror, save_checkpoint) are doing, read without
importing them: %trainwatch status and the dashboard both show it."""

from __future__ import annotations

import sys
from typing import Any


def fix_module(name: str) -> Any:
    """``trainwatch_lab.fix.<name>`` when something in this kernel imported it, else None:
    without it no mirror or save can exist, and looking must not import it."""
    return sys.modules.get(f"trainwatch_lab.fix.{name}")


def mirror_statuses() -> list[Any]:
    """A MirrorStatus per ``local_mirror`` of this kernel (%trainwatch status, the dashboard)."""
    module = fix_module("mirror.mirror")
    return [] if module is None else [m.status() for m in module.active_mirrors()]


def save_status() -> Any:
    """The checkpoint save in flight and the last one (fix.checkpoint.background.SaveStatus),
    or None."""
    module = fix_module("checkpoint.background")
    return None if module is None else module.checkpoint_status()


def mirror_lines() -> list[str]:
    """One status line per ``local_mirror`` of this kernel."""
    return [f"  {st.text()}" for st in mirror_statuses()]
