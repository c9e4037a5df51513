"""Write an exported file through the mount guard, never with ``open()`` in the kernel.

Why: the notebook's working directory may sit on the very share that stopped answering. An
``open``/``write`` there sleeps uninterruptibly; a thread stuck like that can never be
reclaimed and keeps the kernel from exiting. The guard's helper process writes instead
(core.worker.main ``write_text``: temp file, fsync, rename, so the user's file is old or new,
never half) and is abandoned at the deadline; the caller gets one clear line.
"""

from __future__ import annotations

from ..core.defaults import DEFAULTS, Defaults
from ..core.guard.guard import (
    PROBE_LANE,
    MountUnresponsive,
    WorkerFailed,
    WorkerUnavailable,
    default_guard,
)
from ..core.storage.mounts import mount_for_path, read_mounts


class ExportError(OSError):
    """The export was not written; ``str()`` is one line saying why."""


def export_timeout(nbytes: int, defaults: Defaults = DEFAULTS) -> float:
    """A slow share still gets time in proportion to the size, on top of the base."""
    return defaults.export_timeout_s + nbytes / defaults.export_bytes_per_s


def write_file(path: str, text: str, timeout: float | None = None) -> int:
    """Write ``text`` to ``path`` (an absolute path) within ``timeout``; returns the bytes
    written or raises ExportError.

    The probe lane: a helper abandoned while it runs a call of that lane gets SIGTERM first,
    so when the mount answers again it removes its temporary file before it exits (one that
    runs only main-lane calls is SIGKILLed)."""
    nbytes = len(text.encode("utf-8"))
    timeout = export_timeout(nbytes) if timeout is None else float(timeout)
    try:
        mountpoint = mount_for_path(path, read_mounts()).mountpoint
    except (OSError, LookupError) as exc:
        raise ExportError(f"cannot export to {path}: no mount found ({exc})") from None
    try:
        return int(
            default_guard().call(
                mountpoint,
                "write_text",
                timeout=timeout,
                lane=PROBE_LANE,
                what="CSV export",
                path=path,
                text=text,
            )
        )
    except MountUnresponsive as exc:
        raise ExportError(
            f"{path} was not written: the filesystem at {mountpoint} did not answer "
            f"({exc}); try a path on a local disk"
        ) from None
    except OSError as exc:
        raise ExportError(f"{path} was not written: {exc.strerror or exc}") from None
    except (WorkerUnavailable, WorkerFailed) as exc:
        raise ExportError(f"{path} was not written: {exc}") from None
