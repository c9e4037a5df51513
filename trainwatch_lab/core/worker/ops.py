"""The helper's operations that look at a mount: ping, statvfs, inspect (exists, type,
statvfs, quota), the checkpoint scan, the latency probe. Run inside core.worker.main only."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import time
from typing import Any

from ..storage.inspect import file_type, inspect_answer


def op_ping() -> dict[str, Any]:
    return {"pid": os.getpid()}


def op_sleep(seconds: float) -> None:
    """Stand-in for a call that hangs (tests, diagnostics)."""
    time.sleep(seconds)


def op_statvfs(path: str) -> list[int]:
    return list(os.statvfs(path))


def nearest_existing(path: str) -> tuple[str, os.stat_result]:
    """``path`` itself or its nearest existing ancestor (a logdir about to be created)."""
    target = path
    while True:
        try:
            return target, os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(target)
            if parent == target:
                raise
            target = parent


def op_inspect(
    path: str,
    checkpoints: bool = False,
    quota: bool = False,
    device: str | None = None,
    pid: int | None = None,
) -> dict[str, Any]:
    """One round trip per tick: existence, the device, the real path, statvfs and (when
    asked) the checkpoints in the directory and the quotas there that charge ``pid``'s
    writes (``op_quota``)."""
    target, st = nearest_existing(path)
    result = inspect_answer(target, st, target == path, os.path.realpath(target))
    if checkpoints and result["exists"] and result["is_dir"]:
        result["checkpoints"] = op_scan_checkpoints(path)
    if quota and (result["is_dir"] or result["file_type"] == "file"):  # never open a FIFO
        try:
            result["quota"] = op_quota(target, device, pid)
        except OSError as exc:
            result["quota"] = {"quotas": [], "none": f"cannot read it: {exc.strerror or exc}"}
    return result


def op_scan_checkpoints(
    directory: str, budget_s: float | None = None, skip_dirs: list[str] | None = None
) -> dict[str, Any] | None:
    try:
        from ..storage.space import scan_checkpoints
    except ImportError:  # space.py not available: no checkpoint information
        return None
    info = scan_checkpoints(directory, budget_s=budget_s, skip_dirs=frozenset(skip_dirs or ()))
    return dataclasses.asdict(info) if info is not None else None


def op_written_since(
    directory: str,
    since: float,
    budget_s: float | None = None,
    skip_dirs: list[str] | None = None,
    before: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    from ..paths.written import written_since

    skip = frozenset(skip_dirs or ())
    found = written_since(directory, since, budget_s=budget_s, skip_dirs=skip, before=before)
    return dataclasses.asdict(found)


def op_file_sizes(
    directory: str, budget_s: float | None = None, skip_dirs: list[str] | None = None
) -> dict[str, list[int]]:
    from ..paths.written import file_sizes

    return file_sizes(directory, budget_s=budget_s, skip_dirs=frozenset(skip_dirs or ()))


def op_probe(
    directory: str,
    writes: int,
    block_bytes: int,
    budget_s: float,
    interval_s: float = 0.0,
    owned_only: bool = False,
) -> dict[str, Any]:
    """``owned_only``: write only into a directory of this process's user (a directory found
    on the machine, not asked for); an ancestor of a path not created yet always is."""
    from ..storage.probe import clean_leftovers, foreign_owner, probe_directory, probe_refusal

    target, st = nearest_existing(directory)
    why = None
    if target != directory:
        # a logdir not created yet: measured where it will be created, in its nearest
        # existing ancestor (the same filesystem by construction), never next to a file
        # that is in the way
        if not stat.S_ISDIR(st.st_mode):
            why = f"not probed: {target} is not a directory"
    elif stat.S_ISREG(st.st_mode):
        target = os.path.dirname(target)  # a log file: probe the directory it lives in
    elif not stat.S_ISDIR(st.st_mode):
        why = f"not probed: {target} is a {file_type(st.st_mode)}, not storage"
    why = why or probe_refusal(target)  # a kernel pseudo-filesystem: nothing is written
    if why is None and (owned_only or target != directory):
        why = foreign_owner(target)  # another user's directory: read-only facts only
    if why is not None:
        return {"p50_ms": None, "p99_ms": None, "samples": 0, "error": why}
    # a leftover we cannot remove must not prevent the measurement
    with contextlib.suppress(OSError):
        clean_leftovers(target)
    result = probe_directory(target, writes, block_bytes, budget_s, interval_s=interval_s)
    return dataclasses.asdict(result)


def op_clean_leftovers(directory: str) -> int:
    from ..storage.probe import clean_leftovers

    return clean_leftovers(directory)


def op_quota(path: str, device: str | None = None, pid: int | None = None) -> dict[str, Any]:
    """The quotas that apply under ``path`` to the writes of ``pid`` (default: ours; see
    core.storage.quota): one ``quotactl`` per kind."""
    from ..storage.quota import read_quotas

    return read_quotas(path, device=device, pid=pid)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """An exception as the answer's ``error`` object (the guard raises it again)."""
    err: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, OSError):
        err.update(errno=exc.errno, strerror=exc.strerror, filename=exc.filename)
    return err
