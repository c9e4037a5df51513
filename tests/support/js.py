"""The TypeScript side's tools (jest, ESLint, Prettier, stylelint) run from pytest through `jlpm`.

`js/node_modules` comes from `jlpm install` (the package build runs it on a fresh clone); a checkout
whose node_modules predates a tool gets one `jlpm install` here, so the test runs the tool instead
of failing on a missing binary.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.env import need

JS = Path(__file__).resolve().parents[2] / "js"


def jlpm_with(*tools: str) -> str:
    """`jlpm`'s path once Node.js is there and ``tools`` are in js/node_modules/.bin."""
    need(shutil.which("node") is not None, "needs Node.js for the TypeScript tools")
    jlpm = shutil.which("jlpm")
    need(jlpm is not None, "needs `jlpm` (ships with jupyterlab)")
    assert jlpm is not None
    if not all((JS / "node_modules" / ".bin" / tool).exists() for tool in tools):
        install = subprocess.run(
            [jlpm, "install"], cwd=JS, capture_output=True, text=True, timeout=900
        )
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return jlpm


def run_jlpm(jlpm: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``jlpm ARGS`` in js/, its output captured."""
    return subprocess.run([jlpm, *args], cwd=JS, capture_output=True, text=True, timeout=600)
