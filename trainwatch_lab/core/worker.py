"""The helper process that does every call which can touch a mount.

Run as ``python -m trainwatch_lab.core.worker`` by core.guard, one per mount. It reads one
JSON request per line on stdin and answers one JSON line on stdout. Why a separate process:
a ``statvfs`` on a network mount whose server stopped answering sleeps uninterruptibly; a
thread stuck like that can never be reclaimed, and a process with such a thread cannot even
exit. A helper process can at least be abandoned while the caller carries on.

Protocol: on start the worker writes ``{"ready": true, "pid": N}``; then for each
``{"id": I, "op": NAME, "args": {...}}`` it writes ``{"id": I, "ok": true, "result": ...}`` or
``{"id": I, "ok": false, "error": {"type", "errno", "strerror", "filename", "message"}}``.
It exits on EOF, SIGTERM or SIGINT; the latter two raise inside the running operation, so a
probe's ``finally`` still removes its temporary file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import signal
import stat
import sys
import time
from collections.abc import Callable
from typing import Any


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


FILE_TYPES = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISREG, "file"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISLNK, "symbolic link"),
)


def file_type(mode: int) -> str:
    """What a path is, in the words the user reads ("a FIFO: not storage")."""
    return next((name for test, name in FILE_TYPES if test(mode)), "special file")


def inspect_answer(target: str, st: os.stat_result, exists: bool, realpath: str) -> dict[str, Any]:
    """The answer to ``inspect``, whoever looked (this helper, or the paths source itself
    on a mount that cannot hang): ``target`` is the path or its nearest existing ancestor,
    ``file_type`` what ``target`` is."""
    return {
        "exists": exists,
        "target": target,
        "realpath": realpath,
        "is_dir": stat.S_ISDIR(st.st_mode),
        "file_type": file_type(st.st_mode),
        "st_dev": [os.major(st.st_dev), os.minor(st.st_dev)],
        "statvfs": list(os.statvfs(target)),
        "checkpoints": None,
    }


def op_inspect(path: str, checkpoints: bool = False) -> dict[str, Any]:
    """One round trip per tick: existence, the device, the real path, statvfs and (when
    asked) the checkpoints in the directory."""
    target, st = nearest_existing(path)
    result = inspect_answer(target, st, target == path, os.path.realpath(target))
    if checkpoints and result["exists"] and result["is_dir"]:
        result["checkpoints"] = op_scan_checkpoints(path)
    return result


def op_scan_checkpoints(
    directory: str, budget_s: float | None = None, skip_dirs: list[str] | None = None
) -> dict[str, Any] | None:
    try:
        from .space import scan_checkpoints
    except ImportError:  # space.py not available: no checkpoint information
        return None
    info = scan_checkpoints(directory, budget_s=budget_s, skip_dirs=frozenset(skip_dirs or ()))
    return dataclasses.asdict(info) if info is not None else None


def op_probe(
    directory: str,
    writes: int,
    block_bytes: int,
    budget_s: float,
    interval_s: float = 0.0,
) -> dict[str, Any]:
    from .probe import clean_leftovers, probe_directory, probe_refusal

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
    if why is not None:
        return {"p50_ms": None, "p99_ms": None, "samples": 0, "error": why}
    # a leftover we cannot remove must not prevent the measurement
    with contextlib.suppress(OSError):
        clean_leftovers(target)
    result = probe_directory(target, writes, block_bytes, budget_s, interval_s=interval_s)
    return dataclasses.asdict(result)


def op_clean_leftovers(directory: str) -> int:
    from .probe import clean_leftovers

    return clean_leftovers(directory)


def op_write_text(path: str, text: str) -> int:
    """Write a whole user file atomically (CSV export): a hidden temporary file in the same
    directory, fsync, then ``os.replace``. Readers see the old file or the new one, never
    half of one; on any failure (disk full, SIGTERM) the temporary file is removed. Its name
    is chosen before the ``open`` so that even a signal during the create can clean it up."""
    directory, name = os.path.split(os.path.abspath(path))
    data = text.encode("utf-8")
    tmp = os.path.join(directory, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(data)


OPS: dict[str, Callable[..., Any]] = {
    "ping": op_ping,
    "sleep": op_sleep,
    "statvfs": op_statvfs,
    "inspect": op_inspect,
    "scan_checkpoints": op_scan_checkpoints,
    "probe": op_probe,
    "clean_leftovers": op_clean_leftovers,
    "write_text": op_write_text,
}


def _error(exc: BaseException) -> dict[str, Any]:
    err: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, OSError):
        err.update(errno=exc.errno, strerror=exc.strerror, filename=exc.filename)
    return err


def handle(line: str) -> dict[str, Any]:
    rid = None
    try:
        req = json.loads(line)
        rid = req.get("id")
        fn = OPS[req["op"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return {"id": rid, "ok": False, "error": {"type": "BadRequest", "message": repr(exc)}}
    try:
        return {"id": rid, "ok": True, "result": fn(**req.get("args", {}))}
    except Exception as exc:  # reported to the caller, the worker stays up
        return {"id": rid, "ok": False, "error": _error(exc)}


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    # Start-up errors went to the guard through stderr; from now on errors travel in the
    # answers, and stray output (warnings) must not fill a pipe nobody reads until we die.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    for line in sys.stdin:
        if not line.strip():
            continue
        out.write(json.dumps(handle(line)) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SystemExit, KeyboardInterrupt, BrokenPipeError):
        os._exit(0)  # parent gone or told us to stop: nothing left to report
