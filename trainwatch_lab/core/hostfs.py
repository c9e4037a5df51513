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

import os
from dataclasses import dataclass
from typing import Any

from .defaults import DEFAULTS

# the arguments of a guard helper's operations that name a path (core.worker.main.OPS), and the
# fields of their answers that do: translated at the guard, the one door to the filesystem
PATH_ARGS = ("path", "directory")
PATH_LIST_ARGS = ("skip_dirs",)
PATH_ANSWERS = ("target", "realpath", "newest_path")
OWN_MOUNTINFO = "/proc/self/mountinfo"  # this process's mounts (its own files: the history)


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
