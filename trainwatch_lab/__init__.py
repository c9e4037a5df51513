"""trainwatch_lab: storage and GPU next to the running cell.

``import trainwatch_lab`` stays cheap: every Jupyter-side entry point imports its layer only
when Jupyter calls it. The Jupyter entry points are defined here and nowhere else. The version
is written once, in ``js/package.json``; ``__version__`` reads it from the installed metadata.

The map: ``core`` watches (rooms: ``storage``, ``gpu``, ``processes``, ``guard``,
``worker``, ``paths``, ``record``), ``advice`` (``gpu``) turns samples into warnings, ``fix``
(``mirror``, ``checkpoint``) and ``integrations`` are what training code calls, ``notebook``
(``dashboard``, ``cell``), ``prometheus`` (``rules``), ``server`` (``fleet``, ``recording``)
and ``cli`` show it. README's "How it is built" has a line per room.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .fix.checkpoint.save import save_checkpoint
    from .fix.mirror.mirror import local_mirror
    from .notebook.dashboard.widget import TrainWatch

__all__ = ["TrainWatch", "__version__", "local_mirror", "save_checkpoint"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from .version import package_version

        return package_version()
    if name == "TrainWatch":
        from .notebook.dashboard.widget import TrainWatch

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
    return [{"module": "trainwatch_lab"}]  # _load_jupyter_server_extension below


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .server.extension import load_jupyter_server_extension

    load_jupyter_server_extension(serverapp)
