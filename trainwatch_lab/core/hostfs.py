"""Where the host's procfs, sysfs and root filesystem are: the one place that knows.

An agent on the node reads ``/proc``, ``/sys`` and the watched paths as they are. An agent in
a container (a Kubernetes DaemonSet, as node_exporter runs) is given the host's, mounted
read-only at e.g. ``/host/proc``, ``/host/sys`` and ``/host/root`` (``serve --path.procfs``,
``--path.sysfs``, ``--path.rootfs``, node_exporter's flags): the host's mount table comes from
``<procfs>/1/mountinfo`` (init's mount namespace, ``self/mountinfo`` where hidepid hides pid
1), diskstats and host pids from ``<procfs>``, block devices from ``<sysfs>``, and a host path
``/data`` is looked at as ``<rootfs>/data`` but reported as ``/data``.

Set once, at agent start (``use``), before any source is built; every reader of procfs, sysfs
and the watched paths in core/ asks ``current()``. Reads of this process's own files
(``/proc/self``, ``/proc/thread-self``) stay on our own ``/proc``: they are about us.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

from .defaults import DEFAULTS

# the arguments of a guard helper's operations that name a path (core.worker.main.OPS), and the
# fields of their answers that do: translated at the guard, the one door to the filesystem
PATH_ARGS = ("path", "directory")
PATH_LIST_ARGS = ("skip_dirs",)
PATH_ANSWERS = ("target", "realpath", "newest_path")
OWN_MOUNTINFO = "/proc/self/mountinfo"  # this process's mounts (its own files: the history)
# the rootfs, sent along with a helper's arguments: the helper resolves their paths inside it
ROOT_ARG = "_rootfs"
MAX_SYMLINKS = 40  # as the kernel's path walk (ELOOP past it)


@dataclass(frozen=True)
class HostFS:
    """The host's procfs, sysfs and root filesystem as this process sees them."""

    procfs: str = DEFAULTS.host_procfs
    sysfs: str = DEFAULTS.host_sysfs
    rootfs: str = DEFAULTS.host_rootfs

    def __post_init__(self) -> None:
        for name in ("procfs", "sysfs", "rootfs"):
            object.__setattr__(self, name, os.path.normpath(os.path.abspath(getattr(self, name))))

    @property
    def local(self) -> bool:
        """Host paths are ours as they are (no rootfs prefix): today's behaviour."""
        return self.rootfs == "/"

    def proc(self, *parts: object) -> str:
        """``<procfs>/parts...`` (``proc(pid, "io")``)."""
        return os.path.join(self.procfs, *(str(p) for p in parts))

    def sys(self, *parts: object) -> str:
        """``<sysfs>/parts...``."""
        return os.path.join(self.sysfs, *(str(p) for p in parts))

    def mountinfo(self) -> str:
        """The host's mount table. Our own (``/proc/self/mountinfo``) by default; with
        another procfs or a rootfs, init's (``1/mountinfo``: with ``hostPID`` our own
        ``self`` would be the container's mounts), else ``self/mountinfo`` (hidepid hides
        pid 1, as node_exporter falls back)."""
        if self.procfs == DEFAULTS.host_procfs and self.local:
            return OWN_MOUNTINFO
        init = self.proc("1", "mountinfo")
        return init if os.path.exists(init) else self.proc("self", "mountinfo")

    def host_path(self, path: str) -> str:
        """Where this process finds the host's absolute ``path`` (``/data`` ->
        ``/host/root/data``)."""
        if self.local or not path.startswith("/"):
            return path
        return self.rootfs + path if path != "/" else self.rootfs

    def report_path(self, path: str) -> str:
        """The host's name of a path found under the rootfs (``/host/root/data`` ->
        ``/data``); any other path as it is."""
        if self.local:
            return path
        if path == self.rootfs:
            return "/"
        if path.startswith(self.rootfs + "/"):
            return path[len(self.rootfs) :]
        return path

    def helper_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """A guard helper's arguments with their host paths made ours."""
        if self.local:
            return args
        out = dict(args)
        out[ROOT_ARG] = self.rootfs
        for name in PATH_ARGS:
            if isinstance(out.get(name), str):
                out[name] = self.host_path(out[name])
        for name in PATH_LIST_ARGS:
            if isinstance(out.get(name), list):
                out[name] = [self.host_path(p) for p in out[name]]
        return out

    def helper_answer(self, answer: Any) -> Any:
        """A guard helper's answer with the paths it found named as the host names them."""
        if self.local or not isinstance(answer, dict):
            return answer
        out = dict(answer)
        for name in PATH_ANSWERS:
            if isinstance(out.get(name), str):
                out[name] = self.report_path(out[name])
        return out

    def checked(self) -> HostFS:
        """This one, or ValueError (one line, naming the flag) when a directory is missing or
        is not what its flag says: a procfs holds a mount table, a sysfs ``block/``."""
        for flag, where, needs in (
            ("--path.procfs", self.procfs, ("1/mountinfo", "self/mountinfo")),
            ("--path.sysfs", self.sysfs, ("block",)),
            ("--path.rootfs", self.rootfs, ()),
        ):
            if not os.path.isdir(where):
                raise ValueError(f"{flag} {where}: no such directory")
            if needs and not any(os.path.exists(os.path.join(where, n)) for n in needs):
                kind = flag.removeprefix("--path.")
                raise ValueError(f"{flag} {where}: not a {kind} (no {' or '.join(needs)} in it)")
        return self


def resolve_in_root(root: str, path: str) -> str:
    """``path`` (under ``root``) with its symlinks resolved as the host resolves them, as if
    ``root`` were ``/`` (openat2's RESOLVE_IN_ROOT): an absolute target starts again at
    ``root``, ``..`` stops at it, so neither an absolute nor a relative symlink leads out of
    the host's tree into the container's. Touches the filesystem (lstat, readlink): in a
    guard helper only. The part that does not exist yet is kept as written."""
    if path != root and not path.startswith(root.rstrip("/") + "/"):
        return path
    todo = [p for p in path[len(root) :].split("/") if p]
    done: list[str] = []
    links = 0
    missing = False  # below a name that does not exist: no symlink to follow any more
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        if missing:
            done.append(name)
            continue
        here = os.path.join(root, *done, name)
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            missing = True
            done.append(name)
            continue
        if not stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        target = os.readlink(here)
        if target.startswith("/"):
            done = []
        todo[:0] = [p for p in target.split("/") if p]
    return os.path.join(root, *done) if done else root


def resolved_args(args: dict[str, Any]) -> dict[str, Any]:
    """A helper's arguments with their paths resolved inside the rootfs they came with
    (``helper_args``); arguments without one as they are."""
    root = args.get(ROOT_ARG)
    if root is None:
        return args
    out = {k: v for k, v in args.items() if k != ROOT_ARG}
    for name in PATH_ARGS:
        if isinstance(out.get(name), str):
            out[name] = resolve_in_root(root, out[name])
    return out


_current = HostFS()


def current() -> HostFS:
    """The host as this process sees it (``use`` sets it; today's ``/proc``, ``/sys``, ``/``
    until then)."""
    return _current


def procfs() -> str:
    """Where the host's pids are (``current().procfs``): for the per-pid reads."""
    return _current.procfs


def use(host: HostFS) -> None:
    """Read the host through ``host`` from now on: once, at agent start, before any source
    is built. psutil's own reads (process trees where the kernel has no ``children`` files)
    follow it too."""
    global _current
    _current = host
    import psutil

    psutil.PROCFS_PATH = host.procfs
