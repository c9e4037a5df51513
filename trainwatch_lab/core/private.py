"""Directories only this user controls: the rule for every directory we keep files in
(the recorded history, the mirror's local side, the staged saves).

Another user who owns a directory of ours, or may write in it, can read what we put there
(a log with an API key in it) and swap or add files (a checkpoint the mirror then copies to
the share as root). So a directory we use must be ours (or root's) and writable by nobody
else: others could add files there (the -wal SQLite creates next to the history, a checkpoint
the mirror would copy). A sticky directory (like /tmp) is enough only to make a directory of
ours in: no one can replace an entry of ours there. A symbolic link
on the way is only as safe as its owner: another user may point theirs elsewhere after we
looked. Local directories only: ``os.stat`` here must not meet a hung mount.
"""

from __future__ import annotations

import os
import stat

PRIVATE_MODE = 0o700


def untrusted(directory: str, *, only_ours_made_in: bool = False) -> str | None:
    """Why ``directory`` is no place for this user's files, or None when it is (or does not
    exist yet: the caller makes it ``PRIVATE_MODE``). ``only_ours_made_in``: nothing is kept
    in it but a directory of ours made there (a sticky one then passes)."""
    try:
        link = os.lstat(directory)
        st = os.stat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{directory}: {exc.strerror}"
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.geteuid(), 0):
        return f"{directory} is a symbolic link another user owns (uid {link.st_uid})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{directory} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022 and not (only_ours_made_in and st.st_mode & stat.S_ISVTX):
        return f"{directory} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def private_dir(directory: str) -> str | None:
    """Make ``directory`` (``PRIVATE_MODE``; its parent must exist) unless it is there, then
    judge it: None when it is ours alone, else why not (the caller refuses it, or takes
    another name). Made by us with ``mkdir``, it is judged all the same: a name another user
    created a moment before is theirs."""
    try:
        os.mkdir(directory, PRIVATE_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create {directory}: {exc.strerror}"
    return untrusted(directory)
