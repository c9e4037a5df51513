"""The helper's operations for ``save_checkpoint`` (trainwatch_lab.fix): the listing before a
save, a save's private directory, the copy of a save staged on local disk, the commit (fsync,
rename or swap), and what interrupted saves left. Run inside core.worker.main only."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import stat
import tempfile
from typing import Any

from ..storage.inspect import file_type
from .files import TREE_LIMIT, crash_point, read_small
from .ops import nearest_existing


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


def op_saves(
    directory: str,
    pattern: str,
    partial_prefix: str,
    manifest: str | None = None,
    quota: bool = False,
    device: str | None = None,
) -> dict[str, Any]:
    """Before a save (fix.save_checkpoint): free space where ``directory`` is or will be
    created, the earlier saves whose names match ``pattern`` (``[name, bytes, mtime]``), the
    leftovers of interrupted saves (names starting with ``partial_prefix``), the text of
    the saver's ``manifest`` file there (None when there is none) and, with ``quota``, the
    quotas our writes there are charged to (core.storage.quota; ``device`` for kernels
    before quotactl_fd): the space really ours, in the same round trip."""
    target, st = nearest_existing(directory)
    answer: dict[str, Any] = {
        "target": target,
        "exists": target == directory,
        "is_dir": stat.S_ISDIR(st.st_mode),
        "file_type": file_type(st.st_mode),
        "statvfs": list(os.statvfs(target)),
        "saves": [],
        "partials": [],
        "manifest": None,
    }
    if quota:
        from ..storage.quota import read_quotas

        try:
            answer["quota"] = read_quotas(target, device=device)
        except OSError as exc:  # no quota read is no quota: the save goes on
            answer["quota"] = {"quotas": [], "none": f"cannot read it: {exc.strerror or exc}"}
    if answer["exists"] and answer["is_dir"]:
        series = re.compile(pattern)
        for entry in os.scandir(directory):
            if entry.name.startswith(partial_prefix):
                answer["partials"].append(entry.name)
            elif series.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                    answer["saves"].append([entry.name, tree_bytes(entry.path), mtime])
        if manifest is not None:
            raw = read_small(os.path.join(directory, manifest), 4 * 1024 * 1024)
            answer["manifest"] = None if raw is None else raw.decode("utf-8", "replace")
    return answer


PREVIOUS = ".tw-previous"  # inside a save's private directory: the save it replaces


def op_make_partial(directory: str, prefix: str) -> str:
    """A private directory (mode 0700, created exclusively: never a link someone planted) in
    ``directory`` for one save to write into; ``directory`` is created when missing."""
    os.makedirs(directory, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=directory)


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


def _fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


RENAME_EXCHANGE = 2  # linux/fs.h
AT_FDCWD = -100


def exchange(a: str, b: str) -> bool:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``, Linux 3.15+, glibc 2.28+);
    False where the kernel, the C library or the filesystem (sshfs, NFS) cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), a, None, b)


def op_copy_in(src: str, dst: str) -> int:
    """Copy a save written on a local disk (a file or a directory, links kept as links) to
    ``dst``, a new name in the save's private directory on the share; its bytes."""
    if os.path.isdir(src) and not os.path.islink(src):
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copyfile(src, dst, follow_symlinks=False)
    return tree_bytes(dst)


def op_commit(tmp: str, dst: str) -> dict[str, Any]:
    """Make a finished save permanent: fsync it, rename it over ``dst`` (atomic for a file),
    fsync the directory. A directory replacing an older one of the same name is swapped
    with it in one step where the filesystem can; elsewhere the older one is moved into
    the save's private directory (``PREVIOUS``) first, and a helper killed between the two
    renames leaves it there for the next save to put back (``op_discard_partials``). The
    older save is removed only once the new one holds the name, on disk."""
    _fsync_tree(tmp)
    new_is_dir = os.path.isdir(tmp)
    old_is_dir = os.path.isdir(dst) if os.path.lexists(dst) else None
    if old_is_dir is not None and old_is_dir != new_is_dir:
        what = "a directory" if old_is_dir else "a file"
        raise IsADirectoryError(errno.EISDIR, f"{dst} is {what}; the save wrote the other", dst)
    if new_is_dir and old_is_dir:
        if exchange(tmp, dst):
            old = tmp
        else:
            os.makedirs(os.path.join(os.path.dirname(tmp), PREVIOUS), exist_ok=True)
            old = os.path.join(os.path.dirname(tmp), PREVIOUS, os.path.basename(dst))
            os.rename(dst, old)
            crash_point("commit-between-renames")
            try:
                os.rename(tmp, dst)
            except BaseException:
                os.rename(old, dst)
                raise
        _fsync_dir(os.path.dirname(dst))
        crash_point("commit-before-removing-old")
        _remove(old)
    else:
        os.replace(tmp, dst)
        _fsync_dir(os.path.dirname(dst))
    return {"bytes": tree_bytes(dst)}


def _put_back(partial: str, legacy_final: str | None) -> list[str]:
    """The earlier save an interrupted commit moved aside, renamed back where its name is
    missing: ``PREVIOUS/<name>`` in a save's private directory, or (left by versions before
    it) ``partial`` itself, named ``<final>.old``. Returns the names put back."""
    parent = os.path.dirname(partial)
    moved = []
    if legacy_final is not None:
        moved.append((partial, legacy_final))
    elif os.path.isdir(os.path.join(partial, PREVIOUS)) and not os.path.islink(partial):
        previous = os.path.join(partial, PREVIOUS)
        moved += [
            (os.path.join(previous, n), os.path.join(parent, n)) for n in os.listdir(previous)
        ]
    restored = []
    for old, final in moved:
        if os.path.dirname(final) == parent and not os.path.lexists(final):
            os.rename(old, final)
            restored.append(final)
    if restored:
        _fsync_dir(parent)
    return restored


def op_discard_partials(items: list[dict[str, Any]], check: str | None = None) -> dict[str, Any]:
    """Leftovers of interrupted saves (``{"path", "legacy_final"}``): the earlier save that
    an interrupted commit had moved aside is put back when its name is missing, then the
    rest goes. Returns the names put back, the paths removed, those still there (``left``)
    and whether ``check`` (the save's name) exists afterwards."""
    restored: list[str] = []
    removed: list[str] = []
    for item in items:
        path = item["path"]
        with contextlib.suppress(FileNotFoundError):
            restored += _put_back(path, item.get("legacy_final"))
            if os.path.lexists(path):
                _remove(path)
                removed.append(path)
    left = [i["path"] for i in items if os.path.lexists(i["path"])]
    exists = check is not None and os.path.lexists(check)
    return {"restored": restored, "removed": removed, "left": left, "exists": exists}


def op_remove(paths: list[str]) -> list[str]:
    """Remove files or directories (older saves, a failed save's leftovers); missing ones are
    no error. Returns those removed."""
    removed = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            _remove(path)
            removed.append(path)
    return removed
