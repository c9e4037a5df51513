"""Where ``save`` writes when the checkpoint goes to a share: a local disk first.

A process that writes to a network or FUSE filesystem whose server stopped answering is
stuck in the kernel until it answers: no timeout, no signal and no interpreter exit gets it
out (a thread in ``fsync`` on a paused sshfs keeps the process from ending). So for a
directory on a shared mount (judged from the mount table, never by touching it) the
caller's ``save`` writes into a private directory on a local disk with room, and the
guard's helper copies that onto the share (core.worker.saves.op_copy_in) before the usual
fsync and rename there. The helper is another process: a share that hangs costs it, and
the save a timeout, never the training process. When no local disk has room for the last
save, ``save`` writes to the share directly, as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from ...core.guard.guard import MountGuard
from .. import scratch

STAGE_DIR = "trainwatch-saves"
ROOM_FACTOR = 1.25  # a save may grow a little from the last one


def stage_for(directory: str, last: int, prefix: str, guard: MountGuard) -> str | None:
    """A fresh private local directory for a save bound for ``directory``; None when
    ``directory`` is on a local disk already, or no local disk has room for ``last`` bytes
    and a quarter more."""
    if scratch.local_refusal(directory) is None:
        return None
    try:  # this user's own directory (another user's could swap the stage: fix.scratch)
        base = scratch.private_base(scratch.pick_root(None, guard, STAGE_DIR), STAGE_DIR)
    except ValueError:
        return None
    st = os.statvfs(base)
    if st.f_bavail * st.f_frsize < last * ROOM_FACTOR:
        return None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def remove_stage(stage: str | None) -> None:
    if stage is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(stage)
