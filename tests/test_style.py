"""The house style, checked: ruff lint and ruff format over the whole tree (notebooks too)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.env import need_tool

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(command: list[str]) -> None:
    ruff = need_tool("ruff")
    result = subprocess.run([ruff, *command], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
