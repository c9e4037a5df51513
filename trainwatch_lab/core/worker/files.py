"""The helper's operations that write or list user files for the notebook's export (atomic
writes) and trainwatch_lab.fix's mirror (range copies, digests, listings, the share's lock);
``save_checkpoint``'s are in core.worker.saves. Run inside core.worker.main only."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import signal
import stat
import time
from collections.abc import Iterator
from typing import Any

from ..atomic_write import write_atomically
from ..identity import process_home, same_home
from ..storage.inspect import file_type
from .ops import error_fields


def op_write_text(path: str, text: str, tmp_dir: str | None = None) -> int:
    """Write a whole user file atomically (CSV export; core.atomic_write): ``tmp_dir`` is a
    private directory on the same filesystem that its owner removes, also after a SIGKILL."""
    return write_atomically(path, text.encode("utf-8"), tmp_dir=tmp_dir)


# -- the mirror and save_checkpoint (trainwatch_lab.fix) --------------------------------------
COPY_CHUNK = 1 << 20  # bytes per read/write while copying a range
TREE_LIMIT = 100_000  # files listed by ``tree`` at most: a huge share reports truncated
DIGEST_BYTES = 16  # blake2b digest of a copied range (the mirror compares it before appending)
CRASH_ENV = "TRAINWATCH_CRASH_AT"  # tests: the helper SIGKILLs itself at this named point
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def crash_point(name: str) -> None:
    """Die here, like a helper the guard SIGKILLs, when the environment names this point
    (``name``, or ``name@FILE``: once, FILE created as it fires): how the crash tests stop
    a real commit between two of its steps."""
    wanted, _, once = os.environ.get(CRASH_ENV, "").partition("@")
    if wanted != name:
        return
    if once:
        try:
            os.close(os.open(once, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return
    os.kill(os.getpid(), signal.SIGKILL)


class Mismatch(OSError):
    """The share's copy is not what an append needs (gone, shorter, not a regular file): the
    mirror copies the file whole instead of writing into it."""


def _open_target(dst: str, offset: int, create: bool) -> int:
    """``dst`` for writing at ``offset``: a new temporary file (created exclusively, never
    through a link), or an existing regular file at least ``offset`` long. An append never
    creates a file: a missing or shorter copy would come out with a hole of zeros."""
    if create:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        return os.open(dst, NEW_FILE, 0o644)
    try:
        fd = os.open(dst, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        # gone, a symbolic link planted there (ELOOP: never followed), or a network
        # filesystem's stale view of a file replaced behind it (sshfs: EIO): copied whole
        raise Mismatch(exc.errno, f"the share's copy cannot be appended to: {exc}", dst) from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size < offset:
        os.close(fd)
        raise Mismatch(errno.EIO, f"the share's copy holds {st.st_size} of {offset} bytes", dst)
    return fd


def _copy_range(
    src: str,
    dst: str,
    offset: int,
    length: int,
    create: bool = False,
    rename_to: str | None = None,
    mtime_ns: int | None = None,
    end_here: bool = False,
    temporary: bool = False,
) -> dict[str, Any]:
    """Write ``src[offset:offset+length]`` (a local file) at the same offset of ``dst`` (on
    the share) and return the digest of the bytes written, as read, with the source's
    identity after the read (the mirror trusts a copy only when both still hold).
    ``create`` makes ``dst`` (a fresh temporary name); ``rename_to`` then fsyncs it and
    moves it over the real name, so a reader of the share sees the old file or the new one.
    ``end_here`` cuts ``dst`` at the end of the range (an append that ends the file);
    ``mtime_ns`` marks a file fully copied. ``temporary`` (or ``create``): ``dst`` is the
    caller's temporary, removed when this range fails or comes up short, so a full share
    is not kept full by half copies (a killed helper's: the mirror removes them later)."""
    ours = temporary or create
    try:
        fin = open(src, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:  # a local file gone since the scan (a writer's temp file)
        if temporary:
            _discard(dst)
        return {"copied": 0, "end": offset, "gone": True}
    pos = offset
    hasher = hashlib.blake2b(digest_size=DIGEST_BYTES)
    with fin:
        fd = _open_target(dst, offset, create)
        try:
            complete, sst, pos = _write_range(fin, fd, offset, length, hasher)
            if complete and end_here:
                os.ftruncate(fd, pos)
            if complete and rename_to is not None:
                os.fsync(fd)  # a server crash after the rename must not leave it empty
        except BaseException:
            os.close(fd)
            if ours:
                _discard(dst)
            raise
        os.close(fd)
    target = dst
    if not complete:  # the local file shrank under us: the next sync copies it again
        if ours:
            _discard(dst)
    else:
        try:
            if rename_to is not None:
                crash_point("mirror-before-rename")
                os.replace(dst, rename_to)
                target = rename_to
            if mtime_ns is not None:
                os.utime(target, ns=(mtime_ns, mtime_ns), follow_symlinks=False)
        except BaseException:
            if ours and target == dst:
                _discard(dst)
            raise
    source = [sst.st_size, sst.st_mtime_ns, sst.st_ctime_ns, sst.st_ino]
    return {"copied": pos - offset, "end": pos, "digest": hasher.hexdigest(), "src": source}


def _write_range(
    fin: Any, fd: int, offset: int, length: int, hasher: Any
) -> tuple[bool, os.stat_result, int]:
    """Copy the range from ``fin`` to ``fd``; whether it was whole, the source's identity
    after the read and the end written. The source's holes (SEEK_DATA/SEEK_HOLE) are not
    written where the target has no bytes yet, so a sparse log stays sparse on the share
    (its length set with ftruncate); they are hashed as the zeros they read as."""
    src = fin.fileno()
    end = min(offset + length, os.fstat(src).st_size)  # shorter now: not whole, copied again
    had = os.fstat(fd).st_size  # bytes there already: a hole over them is written as zeros
    pos = offset
    while pos < end:
        data = _seek(src, pos, os.SEEK_DATA, end)
        if data > pos:
            _zeros(hasher, fd if pos < had else None, pos, min(data, had) if pos < had else pos)
            _zeros(hasher, None, max(pos, had), data)
            pos = data
            continue
        stop = _seek(src, pos, os.SEEK_HOLE, end)
        fin.seek(pos)
        while pos < stop:
            chunk = fin.read(min(COPY_CHUNK, stop - pos))
            if not chunk:
                return False, os.fstat(src), pos
            hasher.update(chunk)
            view = memoryview(chunk)
            while view:
                written = os.pwrite(fd, view, pos)
                view, pos = view[written:], pos + written
    if pos > os.fstat(fd).st_size:
        os.ftruncate(fd, pos)  # a hole at the end: the length without the blocks
    after = os.fstat(src)  # shrunk meanwhile: its "hole" was no hole, copied again
    return pos == offset + length and after.st_size >= pos, after, pos


def _seek(fd: int, pos: int, whence: int, end: int) -> int:
    """The next data (or hole) at or after ``pos``, at most ``end``; a filesystem that cannot
    tell is all data."""
    try:
        return min(os.lseek(fd, pos, whence), end)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data from here to the end of the file
            return end if whence == os.SEEK_DATA else pos
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return pos if whence == os.SEEK_DATA else end
        raise


_ZEROS = bytes(COPY_CHUNK)


def _zeros(hasher: Any, fd: int | None, start: int, stop: int) -> None:
    """Hash ``[start, stop)`` as zeros, and write them to ``fd`` when given (a hole over
    bytes the target already holds)."""
    pos = start
    while pos < stop:
        n = min(COPY_CHUNK, stop - pos)
        hasher.update(memoryview(_ZEROS)[:n])
        if fd is not None:
            os.pwrite(fd, memoryview(_ZEROS)[:n], pos)
        pos += n


def _discard(path: str) -> None:
    """Remove a temporary of ours that will never be renamed; already gone is fine."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def within_budget(
    items: list[dict[str, Any]], budget_s: float | None, results: list[Any]
) -> Iterator[dict[str, Any]]:
    """``items`` in order until ``budget_s`` has passed (at least one is always done, so a
    batch makes progress however slow the share): the batch answers what it finished."""
    deadline = time.monotonic() + budget_s if budget_s else None
    for item in items:
        if deadline is not None and results and time.monotonic() > deadline:
            return
        yield item


def op_copy_ranges(items: list[dict[str, Any]], budget_s: float | None = None) -> list[Any]:
    """The mirror's one round trip per batch: each item as ``_copy_range``. One file the share
    refuses (permissions, a name it cannot hold) does not stop the others; the answer has one
    entry per item done, ``{"error": ...}`` for a failed one (``"whole": True`` when the
    share's copy cannot be appended to), and stops at ``budget_s``."""
    results: list[Any] = []
    for item in within_budget(items, budget_s, results):
        try:
            results.append(_copy_range(**item))
        except Mismatch as exc:
            results.append({"error": error_fields(exc), "whole": True})
        except OSError as exc:
            results.append({"error": error_fields(exc)})
    return results


def op_digests(items: list[dict[str, Any]], budget_s: float | None = None) -> list[Any]:
    """The digest of ``length`` bytes from ``offset`` (default 0) of each ``path`` (on the
    share), links not followed: a restarted mirror trusts a copy only when it holds the local
    bytes. ``None`` for a file that is not there, shorter or no regular file; stops at
    ``budget_s``."""
    results: list[Any] = []
    for item in within_budget(items, budget_s, results):
        try:
            fd = os.open(item["path"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            results.append(None)
            continue
        with os.fdopen(fd, "rb") as fh:
            fh.seek(item.get("offset", 0))
            hasher, left = hashlib.blake2b(digest_size=DIGEST_BYTES), item["length"]
            while left > 0 and (chunk := fh.read(min(COPY_CHUNK, left))):
                hasher.update(chunk)
                left -= len(chunk)
        results.append(hasher.hexdigest() if left == 0 else None)
    return results


def op_tree(directory: str, limit: int = TREE_LIMIT, skip_prefix: str = "") -> dict[str, Any]:
    """What a directory holds: ``files`` maps each regular file's relative path to ``[size,
    mtime_ns]`` (symlinks not followed, names starting with ``skip_prefix`` left out, those
    of them ending ``.tmp`` listed in ``temps``); ``file_type`` says what the path is when it
    is no directory."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return {"exists": False, "is_dir": False, "file_type": None, "files": {}, "temps": []}
    if not stat.S_ISDIR(st.st_mode):
        return {
            "exists": True,
            "is_dir": False,
            "file_type": file_type(st.st_mode),
            "files": {},
            "temps": [],
        }
    files: dict[str, list[int]] = {}
    temps: list[str] = []
    truncated = False
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not (skip_prefix and d.startswith(skip_prefix))]
        for name in names:
            path = os.path.join(root, name)
            if skip_prefix and name.startswith(skip_prefix):
                if name.endswith(".tmp"):
                    temps.append(os.path.relpath(path, directory))
                continue
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
        "temps": temps,
        "truncated": truncated,
    }


def read_small(path: str, limit: int = 64 * 1024) -> bytes | None:
    """A small file's bytes, links not followed; None when it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def _holder_gone(holder: Any, claimer: dict[str, Any], live: list[str]) -> bool:
    """A lock holder on this host (same hostname, boot and pid namespace: two containers
    with one hostname are two hosts) whose process is gone, or that is the claimer's own
    process with no live mirror behind it (closed while the share hung); another host's is
    judged by age."""
    if not same_home(holder, process_home()) or not same_home(holder, _home_of(claimer)):
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if pid == claimer["pid"]:
        return holder.get("token") not in live
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _home_of(holder: dict[str, Any]) -> dict[str, str]:
    return {k: str(holder.get(k, "")) for k in ("host", "boot", "pidns")}


def _take_over(path: str, raw: bytes, mtime_ns: int, tmp_prefix: str) -> bool:
    """Move the stale lock ``path`` aside, if it is still the one judged (``raw``, last
    refreshed at ``mtime_ns``): another claimer may have taken it over and written its own
    since, and that one must stay. A rename is one step: of two claimers, one moves it."""
    aside = os.path.join(os.path.dirname(path), f"{tmp_prefix}{secrets.token_hex(8)}.tmp")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False  # moved or released meanwhile: the caller tries again
    try:
        moved = os.lstat(aside).st_mtime_ns == mtime_ns and read_small(aside) == raw
    except OSError:
        moved = False
    if moved:
        _discard(aside)
        return True
    try:  # not the one judged: it goes back, unless yet another lock is there now
        os.link(aside, path, follow_symlinks=False)
    except FileExistsError:
        pass
    except OSError:
        with contextlib.suppress(OSError):
            if not os.path.lexists(path):
                os.rename(aside, path)
    _discard(aside)
    return False


def _create_whole(path: str, data: bytes, tmp_prefix: str) -> bool:
    """Create ``path`` holding ``data`` unless it exists, in one step: written to a fresh
    name, then hard-linked to ``path`` (a reader never sees it empty); where the filesystem
    has no hard links, created exclusively and written. False when ``path`` exists."""
    tmp = os.path.join(os.path.dirname(path), f"{tmp_prefix}{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, NEW_FILE, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path, follow_symlinks=False)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    try:
        fd = os.open(path, NEW_FILE, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def share_now(directory: str, tmp_prefix: str) -> float:
    """The share's own clock: the modification time its server gives a file created now (a
    client's clock may be minutes off; every age on the share is judged on this one)."""
    probe = os.path.join(directory, f"{tmp_prefix}{secrets.token_hex(8)}.tmp")
    fd = os.open(probe, NEW_FILE, 0o600)
    try:
        os.write(fd, b"t")  # a server stamps a write with its own time
        return os.fstat(fd).st_mtime_ns / 1e9
    finally:
        os.close(fd)
        _discard(probe)


def _renew(path: str, token: str) -> bool | None:
    """Rewrite our lock in place, so the share stamps its modification time: True when it
    was ours (read through the same descriptor that is written: a lock another claimer put
    there since is never renewed), False when it is another's, None when it is gone."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        raw = os.read(fd, 64 * 1024)
        try:
            ours = json.loads(raw).get("token") == token
        except (ValueError, AttributeError):
            ours = False
        if ours:
            os.pwrite(fd, raw, 0)
            os.fsync(fd)
    finally:
        os.close(fd)
    # moved aside by a takeover between our open and our write: then it is no longer there
    return ours and read_small(path) == raw


def op_claim_share(
    path: str,
    holder: dict[str, Any],
    stale_s: float,
    live: list[str] | None = None,
    tmp_prefix: str = ".tmp-",
) -> dict[str, Any]:
    """Take (or keep) the lock file ``path`` that makes one mirror the only writer of a share
    directory: ``{"ok": True}``, or ``{"ok": False, "holder": ...}`` while another mirror
    holds it. Ours again (the same token): renewed (rewritten, so the share stamps it) once
    it is proven still ours. Another's is taken over only when its process on this host is
    gone (or is the claimer's, and its token is not among the claimer's ``live`` mirrors) or
    it was not renewed for ``stale_s`` as the share's own clock tells (share_now: two hosts
    whose clocks differ judge one age). The file is written under a name starting
    ``tmp_prefix`` first (the mirror's temporaries: a leftover goes with them)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = json.dumps(holder).encode()
    for _ in range(3):
        if _create_whole(path, data, tmp_prefix):
            return {"ok": True}
        raw = read_small(path)
        if raw is None:
            continue  # released meanwhile: try again
        try:
            current = json.loads(raw)
        except ValueError:
            current = None
        if isinstance(current, dict) and current.get("token") == holder["token"]:
            if _renew(path, holder["token"]):
                return {"ok": True}
            continue  # taken over meanwhile: judge the one there now
        try:
            mtime_ns = os.lstat(path).st_mtime_ns
        except FileNotFoundError:
            continue
        age = share_now(os.path.dirname(path), tmp_prefix) - mtime_ns / 1e9
        gone = _holder_gone(current, holder, live or [])
        if current is not None and age < stale_s and not gone:
            return {"ok": False, "holder": current, "age_s": age}
        # stale: moved aside if still the one judged; the next turn creates ours exclusively
        _take_over(path, raw, mtime_ns, tmp_prefix)
    return {"ok": False, "holder": None, "age_s": 0.0}


def op_release_share(path: str, token: str) -> bool:
    """Remove the lock file ``path`` when it is still ours (``token``)."""
    raw = read_small(path)
    try:
        ours = raw is not None and json.loads(raw).get("token") == token
    except (ValueError, AttributeError):
        ours = False
    if ours:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return ours
