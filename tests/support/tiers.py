"""Markers from what a test uses, so the fast tier (``pytest -m "not slow"``) is honest.

A test says what it needs by the fixtures it asks for and the helpers its module imports; this
plugin turns that into markers at collection, so a new test that mounts a tmpfs or opens
Chromium is marked without anyone remembering to:

- ``root`` + ``mount``: a real-filesystem fixture (tests/support/mounts.py);
- ``root``: ``need_root()`` called in the test itself or in a fixture it uses (another user,
  a memory cgroup, the process connector);
- ``browser``: its module drives Chromium (tests/support/lab.py);
- ``framework``: its module trains with torch, Lightning, transformers or Keras
  (tests/support/frameworks.py);
- ``kernel``: its module starts real IPython kernels (nbclient, jupyter_client);
- ``service``: a real Prometheus or node_exporter;
- ``slow``: any of these, or marked so by hand (a long accuracy loop, a wheel build).

``pytest -m "not slow"`` is the contributor's quick run; CI runs everything.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable
from types import ModuleType

import pytest

MOUNT_FIXTURES = frozenset(
    {"tmpfs_mount", "loop_ext4", "readonly_mount", "sshfs_mount", "slow_sshfs_mount"}
)
SERVICE_FIXTURES = frozenset(
    {"prometheus", "start_prometheus", "node_exporter", "node_exporter_on", "victoria_metrics"}
)
# where a module's helpers come from -> the marker that using them means
MODULE_MARKERS = {
    "tests.support.lab": "browser",
    "tests.support.frameworks": "framework",
    "nbclient": "kernel",
    "jupyter_client": "kernel",
    "tests.notebook.kernel": "kernel",
}
HEAVY = ("root", "mount", "browser", "framework", "kernel", "service")


def module_markers(module: ModuleType | None) -> set[str]:
    """Markers for what ``module`` imported: the module of each of its globals."""
    found: set[str] = set()
    if module is None:
        return found
    for value in vars(module).values():
        source = getattr(value, "__module__", None) or getattr(value, "__name__", None)
        if not isinstance(source, str):
            continue
        for prefix, marker in MODULE_MARKERS.items():
            if source == prefix or source.startswith(prefix + "."):
                found.add(marker)
    return found


@functools.cache
def module_text(name: str) -> str:
    try:
        return inspect.getsource(sys.modules[name])
    except (KeyError, OSError, TypeError):
        return ""


@functools.cache
def source_of(function: Callable[..., object]) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def home_calls_need_root(function: Callable[..., object]) -> bool:
    """Whether the module that defines ``function`` calls need_root() anywhere (most do not,
    and reading its text once is cheaper than reading each function's source)."""
    return "need_root(" in module_text(getattr(function, "__module__", "") or "")


@functools.cache
def root_helpers(module_name: str) -> frozenset[str]:
    """The functions a module defines or imports that call ``need_root()``: calling one
    needs root too."""
    module = sys.modules.get(module_name)
    if module is None:
        return frozenset()
    return frozenset(
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and home_calls_need_root(value)
        and "need_root(" in source_of(value)
    )


def calls_need_root(function: Callable[..., object]) -> bool:
    """``need_root()`` in its source, or a call of a function of its module that has it."""
    helpers = root_helpers(getattr(function, "__module__", "") or "")
    if not helpers and not home_calls_need_root(function):
        return False
    text = source_of(function)
    return "need_root(" in text or any(re.search(rf"(?<![\w.]){name}\(", text) for name in helpers)


def fixture_functions(item: pytest.Item) -> list[Callable[..., object]]:
    """The functions of every fixture ``item`` uses, directly or through other fixtures."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [d.func for defs in info.name2fixturedefs.values() for d in defs]


def markers_for(item: pytest.Item) -> set[str]:
    fixtures = set(getattr(item, "fixturenames", ()))
    found = module_markers(getattr(item, "module", None))
    if fixtures & MOUNT_FIXTURES:
        found |= {"root", "mount"}
    if fixtures & SERVICE_FIXTURES:
        found.add("service")
    function = getattr(item, "function", None)
    used = [function, *fixture_functions(item)] if function else fixture_functions(item)
    if any(calls_need_root(f) for f in used):
        found.add("root")
    found |= {m.name for m in item.iter_markers() if m.name in HEAVY}
    if found & set(HEAVY):
        found.add("slow")
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for name in sorted(markers_for(item) - have):
            item.add_marker(name)
