"""The wheel is all a user needs: built once, installed into a fresh virtual environment with
no Node.js on PATH, JupyterLab and Jupyter Server report the extension enabled and OK."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.env import need

pytestmark = pytest.mark.slow  # builds a wheel with the JupyterLab extension: a minute
REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(cmd: list[str], timeout: float = 600, **kwargs) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    output = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, f"{cmd} failed:\n{output[-5000:]}"
    return output


def build_wheel(out: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(REPO)]
    tools = ("hatchling", "hatch_jupyter_builder", "hatch_nodejs_version")
    if all(importlib.util.find_spec(m) for m in tools):
        cmd.insert(4, "--no-build-isolation")  # the build tools are here: no download
    built = (REPO / "trainwatch_lab" / "labextension" / "static" / "style.js").exists()
    need(built or shutil.which("node") is not None, "needs Node.js to build js/ into the wheel")
    run(cmd, timeout=1200)
    (wheel,) = out.glob("trainwatch_lab-*.whl")
    return wheel


def test_wheel_installs_a_working_extension_without_node(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    data = "trainwatch_lab-0.1.0.data/data/"
    assert f"{data}share/jupyter/labextensions/trainwatch-lab/package.json" in names
    assert f"{data}share/jupyter/labextensions/trainwatch-lab/install.json" in names
    assert f"{data}etc/jupyter/jupyter_server_config.d/trainwatch_lab.json" in names
    assert any(n.endswith("static/style.js") for n in names)

    venv = tmp_path / "venv"
    # dependencies (jupyterlab, jupyter_server...) come from the system site; the package and
    # its data files come only from the wheel
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV", "NODE", "npm_"))
    }
    env.update(
        PATH=str(venv / "bin"),  # no node, no npm, no jlpm
        HOME=str(tmp_path / "home"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "home" / ".jupyter"),
        JUPYTER_DATA_DIR=str(tmp_path / "home" / "data"),
    )
    assert shutil.which("node", path=env["PATH"]) is None
    cwd = tmp_path  # not the checkout: `python -c` would import ./trainwatch_lab from there
    where = run(
        [str(python), "-c", "import trainwatch_lab; print(trainwatch_lab.__file__)"],
        env=env,
        cwd=cwd,
    )
    assert where.strip().startswith(str(venv)), where  # the wheel's copy, not the checkout

    labext = run([str(python), "-m", "jupyterlab.labextensions", "list"], env=env, cwd=cwd)
    line = next((ln for ln in labext.splitlines() if "trainwatch-lab" in ln), "")
    assert re.search(r"trainwatch-lab v0\.1\.0 enabled\s+OK", line), labext
    assert str(venv / "share" / "jupyter" / "labextensions") in labext

    server = run(
        [str(python), "-m", "jupyter_server.extension.serverextension", "list"], env=env, cwd=cwd
    )
    assert re.search(r"trainwatch_lab\s+enabled", server), server
    assert re.search(r"trainwatch_lab 0\.1\.0 OK", server), server
