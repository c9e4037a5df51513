"""trainwatch_lab: storage and GPU next to the running cell.

``import trainwatch_lab`` stays cheap: every Jupyter-side entry point imports its layer only
when Jupyter calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .fix.checkpoint import save_checkpoint
    from .fix.mirror import local_mirror
    from .notebook.dashboard import TrainWatch

__all__ = ["TrainWatch", "__version__", "local_mirror", "save_checkpoint"]


def __getattr__(name: str) -> Any:
    if name == "TrainWatch":
        from .notebook.dashboard import TrainWatch

        return TrainWatch
    if name in ("local_mirror", "save_checkpoint"):
        from . import fix

        return getattr(fix, name)
    raise AttributeError(f"module 'trainwatch_lab' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext trainwatch_lab``."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "trainwatch-lab"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "trainwatch_lab.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .server.extension import load_jupyter_server_extension

    load_jupyter_server_extension(serverapp)
