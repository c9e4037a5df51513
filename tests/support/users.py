"""A real second Unix user (made once with ``useradd``) and commands run as that user
(``setpriv``): how the tests show another user cannot read or change what we write."""

from __future__ import annotations

import contextlib
import pwd
import subprocess

from tests.support.env import need_root, need_tool

OTHER = "tw-other"


def other_user() -> pwd.struct_passwd:
    """The second user (skips the test without root, ``setpriv`` or ``useradd``)."""
    need_root()
    need_tool("setpriv")
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(OTHER)
    useradd = need_tool("useradd")
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
        check=True,
    )
    return pwd.getpwnam(OTHER)


def as_user(user: pwd.struct_passwd) -> list[str]:
    """The command prefix that runs what follows as ``user`` (no supplementary groups)."""
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]


def run_as(
    user: pwd.struct_passwd, *cmd: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``cmd`` run as ``user`` (``input`` on its stdin); its exit status is the caller's."""
    return subprocess.run(
        [*as_user(user), *cmd], input=input, capture_output=True, text=True, timeout=30
    )
