"""The trainwatch_lab Jupyter Server extension: REST + WebSocket for the JupyterLab panel.

Importing this package stays cheap; handlers and the sampler load when Jupyter calls the entry
point.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "trainwatch_lab.server"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "../labextension", "dest": "trainwatch-lab"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .extension import load_jupyter_server_extension

    load_jupyter_server_extension(serverapp)
