"""Markers from what a test uses, so the fast tier (``pytest -m "not slow"``) is honest.

A test says what it needs by the fixtures it asks for and the helpers its module imports; this
plugin turns that into markers at collection, so a new test that mounts a tmpfs or opens
Chromium is marked without anyone remembering to:

- ``root`` + ``mount``: a real-filesystem fixture (tests/support/mounts.py), or ``need_root()``
  called in the test itself;
- ``browser``: its module drives Chromium (tests/support/lab.py);
- ``framework``: its module trains with torch, Lightning, transformers or Keras
  (tests/support/frameworks.py);
- ``kernel``: its module starts real IPython kernels (nbclient, jupyter_client);
- ``service``: a real Prometheus or node_exporter;
- ``slow``: any of these, or marked so by hand (a long accuracy loop, a wheel build).

``pytest -m "not slow"`` is the contributor's quick run; CI runs everything.
"""

from __future__ import annotations

import inspect
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


def calls_need_root(function: object) -> bool:
    try:
        return "need_root()" in inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


def markers_for(item: pytest.Item) -> set[str]:
    fixtures = set(getattr(item, "fixturenames", ()))
    found = module_markers(getattr(item, "module", None))
    if fixtures & MOUNT_FIXTURES:
        found |= {"root", "mount"}
    if fixtures & SERVICE_FIXTURES:
        found.add("service")
    if calls_need_root(getattr(item, "function", None)):
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
