"""A small disk that a training loop fills (issue 38's tests:
tests/fix/test_full_disk_training.py, tests/integrations/test_lightning_full_disk.py)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
SAVE_BYTES = 2 * MIB  # Linear(512, 1024): 2 MiB of weights and a 4 KiB bias
CHILD_TIMEOUT_S = 240

CHECK = textwrap.dedent(
    """
    import json, sys, torch
    print(json.dumps({p: torch.load(p)["epoch"] for p in sys.argv[1:]}))
    """
)


def small_disk(loop_ext4: Callable[..., Any]) -> tuple[Path, Path]:
    """A 32 MiB ext4 whose free space, after a filler, holds 2.5 saves: the 3rd dies."""
    m = loop_ext4(size_mb=32)
    ckpt = m.path / "ckpt"
    ckpt.mkdir()
    free = os.statvfs(m.path).f_bavail * os.statvfs(m.path).f_frsize
    filler = m.path / "old-dataset.bin"
    with open(filler, "wb") as fh:
        fh.write(b"d" * (free - int(2.5 * SAVE_BYTES)))
        os.fsync(fh.fileno())
    return ckpt, filler
