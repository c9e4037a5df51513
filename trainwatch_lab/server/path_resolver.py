"""``GET /api/resolvePath`` answered through the mount guard, never on Tornado's loop.

JupyterLab turns each path-like word of an error or stderr output into a link, and asks the
server whether it names a file, once per word. Jupyter Server answers with a plain
``exists()`` on its event loop, relative to its root and to the kernel's working directory.
A word naming a file on a share that stopped answering (a traceback from a TensorBoard writer,
a mirror's notice) then froze the whole server until the share came back: every request,
every kernel's messages, saving (issue 34). Registered by the extension under the same URL,
which Tornado then matches before Jupyter's own.

Only where the look happens changes: the same handler (its authentication, its reply), the
same candidate paths (Jupyter's own functions compute them, without touching a file), and the
existence asked of the guard: on a local disk in this process, on a share in a helper within
the guard's timeout, and not at all while that share is known to hang (the word then stays
plain text, as for any word that names nothing).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from jupyter_server.services.api.handlers import PathResolverHandler
from jupyter_server.utils import ApiPath, to_api_path, to_os_path, url_path_join
from tornado.ioloop import IOLoop

from ..core.guard.guard import MountGuard, MountUnresponsive, WorkerUnavailable, default_guard
from ..core.storage.mounts import mount_for_path, read_mounts

# a call through the guard returns within its timeout, so two threads are never stuck for
# good; a page full of paths on one hung share costs one timeout, then the guard refuses
_LOOKS = ThreadPoolExecutor(2, thread_name_prefix="trainwatch-resolve")


def exists(path: str, guard: MountGuard | None = None) -> str | None:
    """``path``'s real path when it exists, else None; None too when its mount does not
    answer in time (or cannot be asked). Blocks up to the guard's timeout: call it off the
    loop."""
    guard = guard or default_guard()
    try:
        # a lane of its own: the path's text names a local mount, but a link in it may lead
        # onto a share that hangs; that helper's timeout must not mark the local mount stuck
        # for the sampler, the mirror and every check (as mirror, space and save keep theirs)
        key = "resolve:" + mount_for_path(path, read_mounts()).mountpoint
        found = guard.call(key, "inspect", what="stat", path=path)
    except (LookupError, OSError, MountUnresponsive, WorkerUnavailable, RuntimeError):
        return None
    return found["realpath"] if found.get("exists") else None


async def _exists(path: str) -> str | None:
    return await IOLoop.current().run_in_executor(_LOOKS, exists, path)


def server_candidate(contents: Any, path: str) -> tuple[str, str] | None:
    """(the file's path on disk, its API path) by the file contents manager's rules in
    ``resolve_path`` and ``_get_os_path``, without their ``lstat`` and ``exists()``; None
    outside the root, or for a path no file can have."""
    original = Path(path)
    try:
        expanded = original.expanduser()
    except RuntimeError:
        expanded = original
    root = os.path.abspath(contents.root_dir)
    if expanded != original and expanded.is_absolute():
        absolute = os.path.abspath(expanded)
        if not Path(absolute).is_relative_to(root):
            return None
        path = absolute
    relative = to_api_path(path, contents.root_dir)
    if "\0" in relative or os.path.splitdrive(relative)[0]:
        return None
    os_path = to_os_path(ApiPath(relative), root)
    if not (os.path.abspath(os_path) + os.path.sep).startswith(root):
        return None
    return os_path, relative


class GuardedContents:
    """The contents manager as the resolver sees it: only ``resolve_path`` differs."""

    def __init__(self, contents: Any) -> None:
        self._contents = contents

    async def resolve_path(self, path: str) -> str | None:
        if not hasattr(self._contents, "_get_os_path"):  # its files are not on our disks
            answer = self._contents.resolve_path(path)
            return await answer if hasattr(answer, "__await__") else answer
        found = server_candidate(self._contents, path)
        if found is None:
            return None
        os_path, relative = found
        return relative if await _exists(os_path) is not None else None


class GuardedKernel:
    """A kernel as the resolver sees it: paths relative to its working directory."""

    def __init__(self, kernel: Any) -> None:
        self._kernel = kernel

    async def resolve_path(self, path: str) -> str | None:
        provisioner = getattr(self._kernel, "provisioner", None)
        if not isinstance(provisioner, LocalProvisioner):  # elsewhere: its own business
            return self._kernel.resolve_path(path)
        candidate = os.path.expanduser(path)
        if not os.path.isabs(candidate):
            if not provisioner.cwd:
                return None
            real = await _exists(os.path.join(provisioner.cwd, candidate))
            return real  # as Jupyter answers a relative path: resolved
        return candidate if await _exists(candidate) is not None else None


class GuardedKernels:
    def __init__(self, kernels: Any) -> None:
        self._kernels = kernels

    def get_kernel(self, kernel_id: str) -> GuardedKernel:
        return GuardedKernel(self._kernels.get_kernel(kernel_id))


class GuardedPathResolver(PathResolverHandler):
    """Jupyter's handler (its ``get``, authentication and reply), over guarded scopes."""

    @property
    def contents_manager(self) -> Any:
        return GuardedContents(self.settings["contents_manager"])

    @property
    def kernel_manager(self) -> Any:
        return GuardedKernels(self.settings["kernel_manager"])


def routes(base_url: str) -> list[tuple[str, type]]:
    return [(url_path_join(base_url, "api", "resolvePath"), GuardedPathResolver)]
