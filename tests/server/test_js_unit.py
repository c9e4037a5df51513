"""Run the TypeScript model's unit tests (jest, js/test/) from pytest, so the README's one test
command covers them too."""

from __future__ import annotations

import pytest

from tests.support.js import jlpm_with, run_jlpm

pytestmark = pytest.mark.slow  # runs jest under node


def test_js_model_unit_tests() -> None:
    result = run_jlpm(jlpm_with("jest"), "test", "--ci")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "failed" not in output.split("Tests:")[-1].split("\n")[0], output[-2000:]
