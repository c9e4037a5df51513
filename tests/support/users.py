"""A real second Unix user for tests of what another user may do (plant a symlink, own a
directory): ``tw-other``, a system user with no home and no shell, made once."""

from __future__ import annotations

import contextlib
import pwd
import subprocess

from .env import need_root, need_tool

OTHER = "tw-other"


def other_user() -> pwd.struct_passwd:
    """The second user (created when missing; needs root and useradd)."""
    need_root("needs root to act as another user")
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(OTHER)
    useradd = need_tool("useradd")
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
        check=True,
    )
    return pwd.getpwnam(OTHER)


def as_user(user: pwd.struct_passwd, *argv: str) -> None:
    """Run ``argv`` as ``user`` (setpriv, no supplementary groups); it must succeed."""
    setpriv = need_tool("setpriv")
    subprocess.run(
        [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv],
        check=True,
        timeout=60,
    )
