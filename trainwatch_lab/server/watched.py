"""The server's watched paths and why each is watched, apart from the sampler's lifecycle.

Paths carry roles: ``root`` (the Jupyter root dir), ``kernel:<id>`` (a kernel's working
directory), ``process:<pid>`` (a directory of a training process found on the machine:
core.processes.source) and ``user`` (added in the panel). A path is watched while it has a
role; a path the user removed is not re-added automatically until they add it again.
Kernel and process roles are updated from the sampler thread, the user's from the event
loop: one lock guards the table, and ``on_change`` (the running paths source) is told when
a path appears or vanishes, outside the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from ..core.paths.names import normalise

path_key = normalise  # the agreed key (handlers import it under this name)
OnChange = Callable[[str, bool], None]  # (path, watched now)


class WatchedPaths:
    def __init__(self, initial: Iterable[tuple[str, str]] = ()) -> None:
        self._roles: dict[str, set[str]] = {}
        # a path the user removed -> the prefixes ("kernel:", "process:") that still want it:
        # remembered only while one does, so the set is bounded by what is found now
        self._dismissed: dict[str, set[str]] = {}
        self._lock = threading.RLock()
        self.on_change: OnChange | None = None
        for path, role in initial:
            self._roles.setdefault(path_key(path), set()).add(role)

    def paths(self) -> list[str]:
        with self._lock:
            return sorted(self._roles)

    def roles(self) -> dict[str, list[str]]:
        with self._lock:
            return {p: sorted(r) for p, r in sorted(self._roles.items())}

    def requested(self, path: str) -> bool:
        """Whether someone asked for ``path`` (the user, the root dir, a kernel), rather than
        only a training process found on the machine (issue 24: probed only then)."""
        with self._lock:
            return any(not r.startswith("process:") for r in self._roles.get(path_key(path), ()))

    def owner(self, path: str) -> int | None:
        """The training process that brought ``path`` (its ``process:<pid>`` role; the
        lowest pid of several): its writes are the ones a quota there charges."""
        with self._lock:
            return _owner(self._roles.get(path_key(path), ()))

    def _set_roles(self, key: str, add: Iterable[str] = (), drop: Iterable[str] = ()) -> None:
        """Add and drop roles of one path at once; ``on_change`` hears when the path appears
        or vanishes, and (``True`` again) when a watched path's owner changes, so the paths
        source reads the new writer's quota."""
        with self._lock:
            roles = self._roles.setdefault(key, set())
            before, owner_before = bool(roles), _owner(roles)
            roles.difference_update(drop)
            roles.update(add)
            after, owner_after = bool(roles), _owner(roles)
            if not roles:
                del self._roles[key]
        changed = before != after or (after and owner_before != owner_after)
        if changed and self.on_change is not None:
            self.on_change(key, after)

    def add_user_path(self, path: str) -> str:
        key = path_key(path)
        with self._lock:
            self._dismissed.pop(key, None)
        self._set_roles(key, add=["user"])
        return key

    def remove(self, path: str) -> bool:
        """Stop watching ``path`` whatever put it there; auto-roles will not bring it back."""
        key = path_key(path)
        with self._lock:
            roles = set(self._roles.get(key, ()))
            if not roles:
                return False
            wanted_by = {r.split(":", 1)[0] + ":" for r in roles if ":" in r}
            if wanted_by:  # an automatic role would bring it back: remember, while it would
                self._dismissed[key] = wanted_by
        self._set_roles(key, drop=roles)
        return True

    def sync(self, prefix: str, wanted: Iterable[tuple[str, str]]) -> None:
        """Make the roles starting with ``prefix`` exactly ``wanted`` ((path, role) pairs),
        leaving out paths the user removed (sampler thread: kernels, processes)."""
        with self._lock:
            current = {(p, r) for p, rs in self._roles.items() for r in rs if r.startswith(prefix)}
            asked = {(path_key(p), role) for p, role in wanted}
            self._forget_dismissed(prefix, {key for key, _ in asked})
            target = {(key, role) for key, role in asked if key not in self._dismissed}
        changes: dict[str, tuple[list[str], list[str]]] = {}  # path -> (add, drop)
        for key, role in target - current:
            changes.setdefault(key, ([], []))[0].append(role)
        for key, role in current - target:
            changes.setdefault(key, ([], []))[1].append(role)
        for key, (add, drop) in sorted(changes.items()):  # each path told once at most
            self._set_roles(key, add, drop)

    def _forget_dismissed(self, prefix: str, wanted: set[str]) -> None:
        """Under the lock: ``prefix`` no longer wants the dismissed paths outside ``wanted``;
        a path nobody wants any more is forgotten (found again later: watched again)."""
        for key in list(self._dismissed):
            if key not in wanted:
                self._dismissed[key].discard(prefix)
                if not self._dismissed[key]:
                    del self._dismissed[key]


def _owner(roles: Iterable[str]) -> int | None:
    """The lowest pid among ``process:<pid>`` roles (see ``WatchedPaths.owner``)."""
    pids = [int(r.split(":", 1)[1]) for r in roles if r.startswith("process:")]
    return min(pids, default=None)
