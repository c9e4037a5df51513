"""What one look at a path answers (its type, device, real path, statvfs), whoever
looked: the guard's helper process (core.worker.ops) or the paths source itself on a
mount that cannot hang (core.paths.look)."""

from __future__ import annotations

import os
import stat
from typing import Any

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
