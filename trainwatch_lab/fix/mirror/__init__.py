"""The mirror room: ``local_mirror``, training logs written to local disk and copied to a
share by a background thread, so a stalled share never stalls the step.

Owns the thread and its rounds (mirror), what to copy and how (plan), the share's lock
(lock), the first round's proof of what the share holds (seed), the local disk kept from
filling (room, released, tfrecord), the exit sync (at_exit), and the status other
processes read (status, files). Where the local side lives is fix.scratch, shared with the
checkpoint room.

Re-exports the names users import from ``trainwatch_lab.fix.mirror``; code inside the
package imports the modules themselves.
"""

from .lock import ShareInUse
from .mirror import Mirror, active_mirrors, local_mirror
from .status import MirrorStatus

__all__ = ["Mirror", "MirrorStatus", "ShareInUse", "active_mirrors", "local_mirror"]
