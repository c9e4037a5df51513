"""One source for each fact about the package: the version is js/package.json's, and the
Jupyter entry points are defined once, in the package root."""

from __future__ import annotations

import json
from pathlib import Path

import trainwatch_lab
import trainwatch_lab.server

REPO = Path(__file__).resolve().parents[1]
ENTRY_POINTS = (
    "_jupyter_server_extension_points",
    "_jupyter_labextension_paths",
    "_load_jupyter_server_extension",
)


def test_the_version_is_package_json_s() -> None:
    written = json.loads((REPO / "js" / "package.json").read_text())["version"]
    assert trainwatch_lab.__version__ == written
    assert 'version = "' not in (REPO / "pyproject.toml").read_text().split("[project]")[1][:200]


def test_the_entry_points_are_defined_once() -> None:
    for name in ENTRY_POINTS:
        assert callable(getattr(trainwatch_lab, name)), name
        assert not hasattr(trainwatch_lab.server, name), name
    (point,) = trainwatch_lab._jupyter_server_extension_points()
    assert point == {"module": "trainwatch_lab"}
