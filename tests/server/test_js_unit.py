"""Run the TypeScript model's unit tests (jest, js/test/) from pytest, so the README's one test
command covers them too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.env import need

pytestmark = pytest.mark.slow  # runs jest under node
JS = Path(__file__).resolve().parents[2] / "js"


def test_js_model_unit_tests() -> None:
    need(shutil.which("node") is not None, "needs Node.js for the TypeScript unit tests")
    jlpm = shutil.which("jlpm")
    need(jlpm is not None, "needs `jlpm` (ships with jupyterlab)")
    if not (JS / "node_modules" / ".bin" / "jest").exists():
        install = subprocess.run(
            [jlpm, "install"], cwd=JS, capture_output=True, text=True, timeout=900
        )
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    result = subprocess.run(
        [jlpm, "test", "--ci"], cwd=JS, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "failed" not in output.split("Tests:")[-1].split("\n")[0], output[-2000:]
