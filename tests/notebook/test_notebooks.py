"""Every notebook in notebooks/ runs top to bottom in a real kernel (nbclient), and its
outputs say what the notebook promises."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from .kernel import KERNEL_NAME, REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(path: Path, tmp_path: Path) -> Any:
    nb = nbformat.read(path, as_version=4)
    env_path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path  # the kernel inherits it (package not installed)
    try:
        NotebookClient(
            nb, timeout=120, kernel_name=KERNEL_NAME, resources={"metadata": {"path": tmp_path}}
        ).execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return nb


def texts(cell: Any) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            out.append(o["text"])
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "".join(out)


def cell_with(nb: Any, source: str) -> Any:
    return next(c for c in nb.cells if c.cell_type == "code" and source in c.source)


def test_every_notebook_is_covered() -> None:
    assert {p.name for p in NOTEBOOKS} == {
        "quickstart.ipynb",
        "embedding_trainwatch.ipynb",
        "diagnosing_slow_mount.ipynb",
    }
    for path in NOTEBOOKS:  # committed without outputs: CI produces them
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_quickstart(tmp_path: Path) -> None:
    nb = execute(REPO / "notebooks" / "quickstart.ipynb", tmp_path)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert errors == []
    start = cell_with(nb, "%trainwatch --logdir")
    views = [o for o in start.outputs if WIDGET in o.get("data", {})]
    assert len(views) == 1
    status = texts(cell_with(nb, "%trainwatch status"))
    assert "live since" in status
    assert "(found: writer.log_dir)" in status  # discovered after the training cell
    assert "write+fsync p50" in status
    summary = cell_with(nb, "%%trainwatch")
    html = [o["data"]["text/html"] for o in summary.outputs if "text/html" in o.get("data", {})]
    assert any("tw-cell-summary" in h and "peak write" in h for h in html)
    export = texts(cell_with(nb, "export_csv"))
    assert "samples x" in export
    # the export outlives the clean-up: it was saved into the directory the last cell deletes
    saved = Path(export.split("saved to ", 1)[1].split()[0])
    assert saved.is_file() and saved.stat().st_size > 0
    shutil.rmtree(saved.parent)
    assert "stopped after" in texts(cell_with(nb, "%trainwatch stop"))
    # the saved output of the dashboard was refreshed at stop: a frontend without widget
    # state (nbconvert, GitHub) shows the final snapshot, not "waiting for the first sample"
    fallback = views[0]["data"]["text/plain"]
    assert fallback.startswith("trainwatch at") and "/logs" in fallback
    nb.metadata.pop("widgets", None)  # as if saved by a frontend that keeps no widget state
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert "trainwatch at" in html and "tw-cell-summary" in html


def test_embedding_tutorial(tmp_path: Path) -> None:
    nb = execute(REPO / "notebooks" / "embedding_trainwatch.ipynb", tmp_path)
    first = cell_with(nb, "tw = TrainWatch(")
    assert any(WIDGET in o.get("data", {}) for o in first.outputs)
    assert "free space went down by" in texts(cell_with(nb, "tw.history.series"))
    assert "6 samples taken by hand" in texts(cell_with(nb, "sampler.tick()"))


def test_slow_mount_notebook(tmp_path: Path) -> None:
    nb = execute(REPO / "notebooks" / "diagnosing_slow_mount.ipynb", tmp_path)
    check = texts(cell_with(nb, "run_check(targets"))
    assert '"verdict": "ok"' in check or '"verdict": "slow"' in check
    rule = texts(cell_with(nb, "is_slow(state"))
    assert "sshfs over Wi-Fi" in rule and "slow: True" in rule
    assert "local NVMe" in rule and rule.count("slow: False") == 2
    assert "exit code:" in texts(cell_with(nb, '"-m", "trainwatch_lab", "check"'))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_paths_stay_in_temp_dirs(path: Path) -> None:
    """Notebooks clean up after themselves and never write next to the repository."""
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "tempfile.mkdtemp" in source and "rmtree" in source
