"""Fuzz every endpoint from the shipped OpenAPI document with schemathesis against a real
``jupyter server`` (issue 24): no 5xx, every reply as documented, and no file written
anywhere under the root (the server is started with its write probe off, so that the fuzzer's
``POST check`` bodies name directories that must stay untouched)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.env import need
from tests.support.lab import REPO_ROOT, jupyter_lab

SCHEMA = REPO_ROOT / "trainwatch_lab" / "server" / "openapi.json"
SERVER_CONFIG = REPO_ROOT / "trainwatch_lab" / "server" / "etc" / "trainwatch_lab.json"
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)


def snapshot(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in [root, *root.rglob("*")]}


def test_every_endpoint_survives_the_fuzzer(tmp_path: Path) -> None:
    st = shutil.which("st")
    need(st is not None, "needs schemathesis (pip install schemathesis)")
    root = tmp_path / "root"
    (root / "runs").mkdir(parents=True)
    config = tmp_path / "jupyter-config" / "jupyter_server_config.d"
    config.mkdir(parents=True)
    shutil.copy(SERVER_CONFIG, config / "trainwatch_lab.json")
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {"JUPYTER_CONFIG_PATH": str(config.parent), "PYTHONPATH": pythonpath}
    with jupyter_lab(root, extra_args=["--TrainWatch.probe=False"], env=env) as lab:
        before = snapshot(root / "runs")
        proc = subprocess.run(
            [
                *(st, "run", str(SCHEMA), "--url", f"{lab.base}trainwatch-lab"),
                *("-H", f"Authorization: token {lab.token}", "--checks", CHECKS),
                *("--max-examples", "25", "--request-timeout", "30"),
                *("--exclude-path", "/api/stream"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
        assert lab.proc.poll() is None  # still serving
        assert snapshot(root / "runs") == before
