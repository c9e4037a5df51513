"""The notebook surface: ``%trainwatch``, ``%%trainwatch``, the ``TrainWatch`` widget and the
warnings shown under the running cell. Imports IPython/ipywidgets/bqplot, so nothing outside
this package imports it eagerly (``trainwatch_lab`` loads it on first use)."""

from __future__ import annotations

from .dashboard.widget import TrainWatch
from .magics import current, load_ipython_extension, unload_ipython_extension

__all__ = ["TrainWatch", "current", "load_ipython_extension", "unload_ipython_extension"]
