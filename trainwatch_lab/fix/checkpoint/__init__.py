"""The checkpoint room: ``save_checkpoint``, a save that fits, lands whole, and keeps the
newest N, and what framework callbacks use to do the same for the saves they write.

Owns the save itself (save), its manifest of what it wrote (manifest), the temporary name
and the commit through the guard's helper (partial), the local disk a save to a share is
written on first (stage), saves on their own thread (background), a save that does not fit
going elsewhere or waiting (room, with its recorded decisions: events), and ``keep=N`` for a
framework's own saves (retention). The space check (fix.space) and where warnings go
(fix.report) are shared with the rest of fix/.

Re-exports the names users import from ``trainwatch_lab.fix.checkpoint``; code inside the
package imports the modules themselves.
"""

from .background import SaveHandle, SaveInFlight, SaveSkipped, SaveStatus, checkpoint_status
from .save import SaveUnresponsive, save_checkpoint

__all__ = [
    "SaveHandle",
    "SaveInFlight",
    "SaveSkipped",
    "SaveStatus",
    "SaveUnresponsive",
    "checkpoint_status",
    "save_checkpoint",
]
