"""The helper's operations that write or list user files for trainwatch_lab.fix (the mirror,
``save_checkpoint``) and the notebook's export: atomic writes, range copies, listings,
commits. Run inside core.worker only."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from typing import Any

from .worker_ops import error_fields, file_type, nearest_existing


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
            results.append({"error": error_fields(exc)})
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
