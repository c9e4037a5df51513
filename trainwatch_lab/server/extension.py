"""Jupyter Server entry point: one Hub per server, its handlers (REST, WebSocket, /metrics,
the fleet), and a clean shutdown."""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Any

from ..core.redact import redact
from . import path_resolver, scrape
from .config import ServerSettings
from .fleet import api as fleet
from .handlers import handlers
from .hub import SETTINGS_KEY, Hub
from .recording import api as recorded

__all__ = ["SETTINGS_KEY", "load_jupyter_server_extension"]


def load_jupyter_server_extension(serverapp: Any) -> Hub:
    """Register the endpoints; the sampler itself starts only when a client arrives."""
    web_app = serverapp.web_app
    config = ServerSettings(parent=serverapp)
    hub = Hub(
        config,
        root_dir=getattr(serverapp, "root_dir", None),
        kernel_manager=getattr(serverapp, "kernel_manager", None),
        session_manager=getattr(serverapp, "session_manager", None),
    )
    web_app.settings[SETTINGS_KEY] = hub
    web_app.settings[fleet.SETTINGS_KEY] = fleet.make_fleet(config, hub.defaults)
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(
        ".*$",
        handlers(base_url)
        + scrape.routes(base_url)
        + fleet.routes(base_url)
        + recorded.routes(base_url)
        + path_resolver.routes(base_url),
    )
    _on_shutdown(hub)
    if config.attach_kernels:
        from tornado.ioloop import IOLoop

        IOLoop.current().add_callback(
            _open_attach, hub, serverapp.log, getattr(serverapp, "runtime_dir", None)
        )
    if hub.notifier is not None or hub.recording is not None:
        # word when nobody looks (issue 17), a history when nobody looks (issue 27): they
        # hold the lease like a client, so the sampler runs from the start (the notifier
        # for good; the recording lets go while nothing is worth recording)
        from tornado.ioloop import IOLoop

        if hub.notifier is not None:
            IOLoop.current().add_callback(hub.acquire)
        if hub.recording is not None:
            IOLoop.current().add_callback(hub.recording_wake)
    serverapp.log.info(
        "trainwatch_lab: endpoints under %strainwatch-lab/api/, metrics at %strainwatch-lab/"
        "metrics%s (%s)",
        base_url,
        base_url,
        f", the fleet from {redact(config.prometheus_url)}" if config.prometheus_url else "",
        f"recording the history to {hub.recording.recorder.path}"
        if hub.recording is not None
        else "sampler starts on first client",
    )
    return hub


def _open_attach(hub: Hub, logger: Any, runtime_dir: str | None) -> None:
    """The socket kernels attach to (server.attach), named in the environment every kernel
    this server starts inherits. Without it (no Unix sockets) kernels sample by themselves."""
    from .attach import ENV, AttachServer

    try:
        hub.attach = AttachServer(hub, runtime_dir=runtime_dir)
    except OSError as exc:
        logger.warning("trainwatch_lab: kernels will sample by themselves: %s", exc)
        return
    os.environ[ENV] = hub.attach.name


def _on_shutdown(hub: Hub) -> None:
    """Close the sampler (helper processes, NVML) when the server process exits.

    Function-style server extensions get no shutdown hook from jupyter_server; a weak
    reference keeps short-lived test servers collectable.
    """
    ref = weakref.ref(hub)

    def close() -> None:
        alive = ref()
        if alive is not None:
            alive.close_now()

    atexit.register(close)
