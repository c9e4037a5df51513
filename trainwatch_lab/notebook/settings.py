"""The one check of what a user asks to watch, shared by ``%trainwatch`` and ``TrainWatch()``.

Why one function: the widget and the magic are two doors to the same dashboard; a setting
one refuses the other must refuse too, with the same one-line reason. Errors are ValueError
(a bad value) or TypeError (a value of the wrong kind); the magic turns them into UsageError.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.defaults import DEFAULTS
from ..core.paths.names import normalise

log = logging.getLogger(__name__)

MIN_WINDOW_S = 10.0
MAX_WINDOW_S = 24 * 3600.0
MAX_HISTORY_SAMPLES = DEFAULTS.max_history_samples
PATH_CHECK_TIMEOUT_S = 1.0

WIDGET_NAMES: Mapping[str, str] = {"interval": "interval", "window": "window"}


def as_path_list(paths: Any) -> list[str]:
    """One path (str or os.PathLike) or an iterable of them -> list of str; a str is one
    path, never a sequence of one-letter paths."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif isinstance(paths, bytes) or not isinstance(paths, Iterable):
        raise TypeError(
            f"paths must be a path or a list of paths, got {type(paths).__name__} {paths!r}"
        )
    out = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"each path must be a str or os.PathLike, got {p!r}")
        out.append(os.fspath(p))
    return out


def check_path(path: str) -> str:
    """Reject a path that cannot exist (a file is in the way) or is no storage (a device, a
    FIFO, /proc: core.paths.names.judge, as the CLI and the server judge it); returns its key.

    The lookup goes through the mount guard (core.paths.names.locate), so a dead mount costs at
    most PATH_CHECK_TIMEOUT_S here, and then the path is accepted: the sampler will report
    the mount as unresponsive, off the main thread.
    """
    from ..core.paths.names import locate, printable

    if not isinstance(path, str) or not path or "\x00" in path:
        raise ValueError(f"bad path {path!r}")
    key = normalise(path)
    try:
        where = locate(key, timeout=PATH_CHECK_TIMEOUT_S)
    except Exception:  # unresponsive mount, helper unavailable: not the user's input error
        log.debug("trainwatch: could not check %s", key, exc_info=True)
        return key
    if where.refusal is not None:  # core.paths.names.judge: a file in the way, /dev, a FIFO
        raise ValueError(printable(where.refusal))
    return key


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    return float(value)


def check_settings(
    paths: Any,
    interval: Any,
    window: Any,
    names: Mapping[str, str] = WIDGET_NAMES,
) -> tuple[list[str], float, float]:
    """Validate paths, interval and window together; returns (path keys, interval, window).

    ``names`` words the messages (``--interval`` for the magic, ``interval`` for the widget).
    """
    iv, wn = names["interval"], names["window"]
    interval = _seconds(interval, iv)
    window = _seconds(window, wn)
    if not interval > 0 or not math.isfinite(interval):
        raise ValueError(f"{iv} must be more than 0 s, got {interval:g}")
    if interval < DEFAULTS.min_interval_s:  # the magic's --interval refuses the same
        raise ValueError(
            f"{iv} must be at least {DEFAULTS.min_interval_s:g} s, got {interval:g} "
            "(sampling faster costs more than any chart can show)"
        )
    if not MIN_WINDOW_S <= window <= MAX_WINDOW_S:
        raise ValueError(f"{wn} must be between 10s and 24h, got {window:g} s")
    if window / interval > MAX_HISTORY_SAMPLES:
        raise ValueError(
            f"{wn} {window:g} s at {iv} {interval:g} s would keep more than "
            f"{MAX_HISTORY_SAMPLES} samples; use a longer {iv}"
        )
    if window < 2 * interval:
        raise ValueError(
            f"{wn} ({window:g} s) must hold at least two samples of {iv} ({interval:g} s)"
        )
    keys = [check_path(p) for p in as_path_list(paths)]
    return list(dict.fromkeys(keys)), interval, window
