"""The dashboard's controls answer while a cell runs: their messages go to the kernel
subshell the browser sent them on. Its own module because the layout and the warnings pane
both make controls, and neither may import the other."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets


def _frontend_choice(data: Any, default: str | None) -> str | None:
    return default


def follow_frontend_subshell(widget: widgets.Widget) -> None:
    """Let the browser's clicks on ``widget`` reach a kernel subshell while a cell runs.

    JupyterLab 4.4+ sends widget messages on a subshell (ipykernel 7), so a callback runs
    while the main shell is busy. ipykernel 7.4 then routes each message of a comm to the
    subshell that last *published* on it (so a reply reaches the loop that asked), and a
    widget made by a cell last published from the main shell: every click would wait for
    the running cell to end. Our controls never ask the browser anything, so their messages
    go where the frontend sent them. Without that hook (other kernels, older ipykernel)
    nothing changes.
    """
    comm = getattr(widget, "comm", None)
    if comm is not None and callable(getattr(comm, "_reply_subshell_for", None)):
        comm._reply_subshell_for = _frontend_choice
