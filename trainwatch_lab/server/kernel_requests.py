"""Which kernel ends were asked for: a shutdown or restart requested of the server's kernel
manager (DELETE /api/kernels/<id>, POST .../restart, a session closed, the idle culler, the
server's own shutdown) ends the kernel's process as a death does, so the recorded end says
it was asked (issue 27: a normal shutdown is no "while you were away" card).

The multi-kernel manager's ``shutdown_kernel``, ``restart_kernel``, ``shutdown_all`` and
``cull_kernel_if_idle`` are wrapped on the instance: those are what a request goes through,
while the restarter's automatic restart after a death calls the kernel's own manager, never
these (the server's ``kernel_actions`` events cannot tell the two apart). A request is kept
with the kernel's pid at that moment, so only the end of that very process is said to be
asked; the recorder's EventWatch takes it when it sees that end (sampler thread).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from .kernels import kernel_pid

MAX_KEPT = 256  # requests whose end was not seen yet (kernels that never started): a bound

# who asks, for the shutdowns made inside shutdown_all and the culler
_BY: contextvars.ContextVar[str] = contextvars.ContextVar("trainwatch_kernel_asked_by")


class KernelRequests:
    """Requested shutdowns and restarts, by (kernel id, pid), until their end is seen."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._asked: dict[tuple[str, int], dict[str, Any]] = {}

    def ask(self, kernel_manager: Any, kid: str, action: str) -> None:  # event loop
        try:
            pid = kernel_pid(kernel_manager.get_kernel(kid))
        except KeyError:
            return
        if pid is None:
            return
        with self._lock:
            self._asked[(kid, pid)] = {
                "requested": action,
                "asked_by": _BY.get("client"),
                "asked_at": self.clock(),
            }
            while len(self._asked) > MAX_KEPT:
                del self._asked[next(iter(self._asked))]

    def take(self, kid: str, pid: int | None) -> dict[str, Any] | None:  # sampler thread
        """What was asked of this kernel's process (None: its end was not asked for)."""
        if pid is None:
            return None
        with self._lock:
            return self._asked.pop((kid, int(pid)), None)

    @classmethod
    def of(cls, kernel_manager: Any) -> KernelRequests:
        """The requests asked of ``kernel_manager``: wrapped once, the same table after
        (a second recording of the same server reads what the first installed)."""
        held = getattr(kernel_manager, "_trainwatch_requests", None)
        if isinstance(held, cls):
            return held
        requests = cls()
        if kernel_manager is not None:
            requests._install(kernel_manager)
        return requests

    def _install(self, kernel_manager: Any) -> None:
        """Wrap the manager's request methods (those it has)."""
        # (shutdown_all's own calls go through _async_shutdown_kernel, not shutdown_kernel)
        for name, action in (
            ("shutdown_kernel", "shutdown"),
            ("_async_shutdown_kernel", "shutdown"),
            ("restart_kernel", "restart"),
        ):
            original = getattr(kernel_manager, name, None)
            if callable(original):
                setattr(kernel_manager, name, self._asking(kernel_manager, original, action))
        for name, by in (("shutdown_all", "server"), ("cull_kernel_if_idle", "culler")):
            original = getattr(kernel_manager, name, None)
            if callable(original):
                setattr(kernel_manager, name, _on_behalf(original, by))
        kernel_manager._trainwatch_requests = self

    def _asking(self, km: Any, original: Callable[..., Any], action: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def asking(kernel_id: str, *args: Any, **kwargs: Any) -> Any:
            self.ask(km, kernel_id, action)
            return original(kernel_id, *args, **kwargs)

        return asking


def _on_behalf(original: Callable[..., Any], by: str) -> Callable[..., Any]:
    """``original`` with the shutdowns it makes said to be asked by ``by`` (a coroutine
    function stays one, a plain one stays plain: its callers await it or not)."""
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def on_behalf_async(*args: Any, **kwargs: Any) -> Any:
            token = _BY.set(by)
            try:
                return await original(*args, **kwargs)
            finally:
                _BY.reset(token)

        return on_behalf_async

    @functools.wraps(original)
    def on_behalf(*args: Any, **kwargs: Any) -> Any:
        token = _BY.set(by)
        try:
            return original(*args, **kwargs)
        finally:
            _BY.reset(token)

    return on_behalf
