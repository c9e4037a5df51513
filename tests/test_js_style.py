"""The house style of the TypeScript side, checked as ruff checks the Python: stylelint over
js/style, Prettier over js/, ESLint (jupyterlab/extension-template's rules) over js/src and
js/test, through `jlpm lint:check`; `cd js && jlpm lint` fixes what it can."""

from __future__ import annotations

import pytest

from tests.support.js import jlpm_with, run_jlpm

pytestmark = pytest.mark.slow  # runs node (ESLint type-checks the sources)


def test_js_lint_is_clean() -> None:
    result = run_jlpm(jlpm_with("eslint", "prettier", "stylelint"), "lint:check")
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
