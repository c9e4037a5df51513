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
import errno
import json
import os
import re
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


def op_inspect(
    path: str, checkpoints: bool = False, quota: bool = False, device: str | None = None
) -> dict[str, Any]:
    """One round trip per tick: existence, the device, the real path, statvfs and (when
    asked) the checkpoints in the directory and the quotas there (``op_quota``)."""
    target, st = nearest_existing(path)
    result = inspect_answer(target, st, target == path, os.path.realpath(target))
    if checkpoints and result["exists"] and result["is_dir"]:
        result["checkpoints"] = op_scan_checkpoints(path)
    if quota and (result["is_dir"] or result["file_type"] == "file"):  # never open a FIFO
        try:
            result["quota"] = op_quota(target, device)
        except OSError as exc:
            result["quota"] = {"quotas": [], "none": f"cannot read it: {exc.strerror or exc}"}
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


# -- the mirror and save_checkpoint (trainwatch_lab.fix) --------------------------------------
COPY_CHUNK = 1 << 20  # bytes per read/write while copying a range
TREE_LIMIT = 100_000  # files listed by ``tree`` at most: a huge share reports truncated


def _copy_range(
    src: str,
    dst: str,
    offset: int,
    length: int,
    create: bool = False,
    rename_to: str | None = None,
    mtime_ns: int | None = None,
) -> dict[str, int]:
    """Write ``src[offset:offset+length]`` (a local file) at the same offset of ``dst`` (on
    the share). ``create`` truncates ``dst`` first (a whole copy into a temporary name);
    ``rename_to`` then moves it over the real name, so a reader of the share sees the old
    file or the new one. ``mtime_ns`` marks a file fully copied (resuming compares it)."""
    try:
        fin = open(src, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:  # a local file gone since the scan (a writer's temp file)
        return {"copied": 0, "end": offset, "gone": True}
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if create else 0)
    pos = offset
    with fin:
        fd = os.open(dst, flags, 0o644)
        try:
            fin.seek(offset)
            while pos < offset + length:
                chunk = fin.read(min(COPY_CHUNK, offset + length - pos))
                if not chunk:  # the local file shrank under us: the next sync copies it again
                    break
                view = memoryview(chunk)
                while view:
                    written = os.pwrite(fd, view, pos)
                    view, pos = view[written:], pos + written
        finally:
            os.close(fd)
    target = dst
    if rename_to is not None and pos == offset + length:
        os.replace(dst, rename_to)
        target = rename_to
    if mtime_ns is not None and pos == offset + length:
        os.utime(target, ns=(mtime_ns, mtime_ns))
    return {"copied": pos - offset, "end": pos}


def op_copy_ranges(items: list[dict[str, Any]], budget_s: float | None = None) -> list[Any]:
    """The mirror's one round trip per batch: each item as ``_copy_range``. One file the share
    refuses (permissions, a name it cannot hold) does not stop the others; the answer has one
    entry per item done, ``{"error": ...}`` for a failed one, and stops at ``budget_s``."""
    deadline = time.monotonic() + budget_s if budget_s else None
    results: list[Any] = []
    for item in items:
        if deadline is not None and results and time.monotonic() > deadline:
            break
        try:
            results.append(_copy_range(**item))
        except OSError as exc:
            results.append({"error": _error(exc)})
    return results


def op_tree(directory: str, limit: int = TREE_LIMIT, skip_prefix: str = "") -> dict[str, Any]:
    """What a directory holds: ``files`` maps each regular file's relative path to ``[size,
    mtime_ns]`` (symlinks not followed, names starting with ``skip_prefix`` left out);
    ``file_type`` says what the path is when it is no directory."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return {"exists": False, "is_dir": False, "file_type": None, "files": {}}
    if not stat.S_ISDIR(st.st_mode):
        return {"exists": True, "is_dir": False, "file_type": file_type(st.st_mode), "files": {}}
    files: dict[str, list[int]] = {}
    truncated = False
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not (skip_prefix and d.startswith(skip_prefix))]
        for name in names:
            if skip_prefix and name.startswith(skip_prefix):
                continue
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                fst = os.lstat(path)
                if stat.S_ISREG(fst.st_mode):
                    files[os.path.relpath(path, directory)] = [fst.st_size, fst.st_mtime_ns]
            if len(files) >= limit:
                truncated = True
                break
        if truncated:
            break
    return {
        "exists": True,
        "is_dir": True,
        "file_type": "directory",
        "files": files,
        "truncated": truncated,
    }


def tree_bytes(path: str, limit: int = TREE_LIMIT) -> int:
    """Bytes of a file, or of every regular file under a directory (one save of either)."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size
    total, seen = 0, 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
            seen += 1
            if seen >= limit:
                return total
    return total


def op_saves(directory: str, pattern: str, partial_prefix: str) -> dict[str, Any]:
    """Before a save (fix.save_checkpoint): free space where ``directory`` is or will be
    created, the earlier saves whose names match ``pattern`` (``[name, bytes, mtime]``) and
    the leftovers of interrupted saves (names starting with ``partial_prefix``)."""
    target, st = nearest_existing(directory)
    answer: dict[str, Any] = {
        "target": target,
        "exists": target == directory,
        "is_dir": stat.S_ISDIR(st.st_mode),
        "file_type": file_type(st.st_mode),
        "statvfs": list(os.statvfs(target)),
        "saves": [],
        "partials": [],
    }
    if answer["exists"] and answer["is_dir"]:
        series = re.compile(pattern)
        for entry in os.scandir(directory):
            if entry.name.startswith(partial_prefix):
                answer["partials"].append(entry.name)
            elif series.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                    answer["saves"].append([entry.name, tree_bytes(entry.path), mtime])
    return answer


def _fsync_tree(path: str) -> None:
    """fsync a file, or every file and directory of a saved directory."""
    paths = [path]
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, names in os.walk(path):
            paths += [os.path.join(root, n) for n in (*names, *dirs)]
    for p in paths:
        if os.path.islink(p):
            continue
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: str) -> None:
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def op_commit(tmp: str, dst: str) -> dict[str, Any]:
    """Make a finished save permanent: fsync it, rename it over ``dst`` (atomic for a file),
    fsync the directory. A directory replacing an older one of the same name swaps places
    with it first (the old one then goes): at every moment one whole save has the name."""
    _fsync_tree(tmp)
    new_is_dir = os.path.isdir(tmp)
    old_is_dir = os.path.isdir(dst) if os.path.lexists(dst) else None
    if old_is_dir is not None and old_is_dir != new_is_dir:
        what = "a directory" if old_is_dir else "a file"
        raise IsADirectoryError(errno.EISDIR, f"{dst} is {what}; the save wrote the other", dst)
    if new_is_dir and old_is_dir:
        old = f"{tmp}.old"
        os.rename(dst, old)
        try:
            os.rename(tmp, dst)
        except BaseException:
            os.rename(old, dst)
            raise
        _remove(old)
    else:
        os.replace(tmp, dst)
    fd = os.open(os.path.dirname(dst) or ".", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"bytes": tree_bytes(dst)}


def op_remove(paths: list[str]) -> list[str]:
    """Remove files or directories (older saves, a failed save's leftovers); missing ones are
    no error. Returns those removed."""
    removed = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            _remove(path)
            removed.append(path)
    return removed


def op_quota(path: str, device: str | None = None) -> dict[str, Any]:
    """The quotas that apply under ``path`` (core.quota): one ``quotactl`` per kind."""
    from .quota import read_quotas

    return read_quotas(path, device=device)


OPS: dict[str, Callable[..., Any]] = {
    "ping": op_ping,
    "sleep": op_sleep,
    "statvfs": op_statvfs,
    "inspect": op_inspect,
    "scan_checkpoints": op_scan_checkpoints,
    "probe": op_probe,
    "clean_leftovers": op_clean_leftovers,
    "write_text": op_write_text,
    "copy_ranges": op_copy_ranges,
    "tree": op_tree,
    "saves": op_saves,
    "commit": op_commit,
    "remove": op_remove,
    "quota": op_quota,
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
