"""Find the log and checkpoint directories a notebook has set up, by duck typing.

After each cell we look through the user namespace for the objects training code creates:
torch/tensorboardX ``SummaryWriter`` (``log_dir``/``logdir``), Lightning loggers
(``log_dir``, ``save_dir``) and ``ModelCheckpoint`` (``dirpath``), a Lightning ``Trainer``
(its ``loggers``/``callbacks``), Hugging Face ``TrainingArguments`` (``output_dir``,
``logging_dir``) and an HF ``Trainer`` (its ``args``). None of those libraries is imported:
importing torch just to look would cost seconds and memory in every kernel.

Attributes are looked up with ``inspect.getattr_static`` first, so objects that answer every
attribute (mocks, DataFrames, proxies) are never asked, and nothing touches the filesystem:
a path is only normalised (``abspath(expanduser())``), never stat'ed.
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.paths import normalise

# attribute -> what it is, in the order we report them
PATH_ATTRS: tuple[tuple[str, str], ...] = (
    ("log_dir", "log directory"),
    ("logdir", "log directory"),
    ("save_dir", "log directory"),
    ("dirpath", "checkpoint directory"),
    ("output_dir", "output directory"),
    ("logging_dir", "log directory"),
)
# attributes that hold more such objects (Lightning/HF trainers)
CONTAINER_ATTRS: tuple[str, ...] = (
    "loggers",
    "logger",
    "callbacks",
    "checkpoint_callback",
    "args",
)
_SKIP_TYPES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    dict,
    set,
    frozenset,
)
MAX_ITEMS = 64  # elements looked at in one list/tuple, so a huge list never costs a cell


@dataclass(frozen=True)
class Found:
    """A directory found on an object: ``writer.log_dir`` -> ``/root/runs/exp1``."""

    path: str  # normalised key (abspath(expanduser)), as every other layer uses
    where: str  # how the user named it: "writer.log_dir", "trainer.callbacks[1].dirpath"
    what: str  # "log directory", "checkpoint directory", "output directory"


def _static_has(obj: Any, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def _read(obj: Any, name: str) -> Any:
    """The attribute's value when the object really defines it; None otherwise or on error."""
    if not _static_has(obj, name):
        return None
    try:
        return getattr(obj, name)
    except Exception:  # a property that raises is not our problem
        return None


def _as_path(value: Any) -> str | None:
    if isinstance(value, (str, os.PathLike)):
        try:
            text = os.fspath(value)
        except TypeError:
            return None
        if isinstance(text, str) and text and "\x00" not in text and "://" not in text:
            return normalise(text)
    return None


def _candidates(obj: Any, where: str, depth: int) -> Iterator[tuple[Any, str]]:
    """The object itself, the elements of a list/tuple, and (one level down) its containers."""
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj[:MAX_ITEMS]):
            yield from _candidates(item, f"{where}[{i}]", depth)
        return
    if isinstance(obj, _SKIP_TYPES) or obj is None:
        return
    yield obj, where
    if depth <= 0:
        return
    for name in CONTAINER_ATTRS:
        inner = _read(obj, name)
        if inner is not None and inner is not obj:
            yield from _candidates(inner, f"{where}.{name}", depth - 1)


def find_on(obj: Any, where: str, depth: int = 1) -> list[Found]:
    """Every log/checkpoint directory on ``obj`` (and its loggers/callbacks/args)."""
    found: list[Found] = []
    for candidate, name in _candidates(obj, where, depth):
        for attr, what in PATH_ATTRS:
            path = _as_path(_read(candidate, attr))
            if path is not None:
                found.append(Found(path=path, where=f"{name}.{attr}", what=what))
    return found


def discover(namespace: Mapping[str, Any], names: Iterable[str] | None = None) -> list[Found]:
    """Directories reachable from the user's public variables, one entry per path.

    ``names`` restricts the search (e.g. to the variables a cell just assigned).
    """
    seen: dict[str, Found] = {}
    keys = list(namespace) if names is None else [n for n in names if n in namespace]
    for name in keys:
        if name.startswith("_"):
            continue
        try:
            value = namespace[name]
        except Exception:
            continue
        for item in find_on(value, name):
            seen.setdefault(item.path, item)
    return list(seen.values())
