"""Issue 24, finding 7: input is validated whole. ``re.match`` with a pattern ending in ``$``
accepts a trailing newline ("1m\\n"); every validator uses ``fullmatch`` instead, and a rule
over the source keeps it so (a test that proves it can fail: the old pattern is caught)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from traitlets import TraitError

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.storage.probe import clean_leftovers, host_tag
from trainwatch_lab.prometheus.fleet import host_selector
from trainwatch_lab.prometheus.rules.ruleset import rules_yaml
from trainwatch_lab.server.config import ServerSettings

PACKAGE = Path(__file__).resolve().parents[1] / "trainwatch_lab"


def test_a_rate_window_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError):
        rules_yaml(DEFAULTS, "1m\n")
    with pytest.raises(TraitError):
        ServerSettings(fleet_rate_window="1m\n")
    assert ServerSettings(fleet_rate_window="2m").fleet_rate_window == "2m"


def test_a_host_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError):
        host_selector("node1\n")
    assert "node1" in host_selector("node1")


def test_a_leftover_lookalike_with_a_newline_is_not_removed(tmp_path: Path) -> None:
    """clean_leftovers removes our probe files only: a user's file whose name merely ends
    like one (a newline after .tmp) stays."""
    dead = f".trainwatch-probe-{host_tag()}-{2**22 + 7}-abcd.tmp"  # no such pid
    (tmp_path / dead).write_text("")
    theirs = tmp_path / (dead + "\n")
    theirs.write_text("keep me")
    assert clean_leftovers(str(tmp_path)) == 1
    assert theirs.exists()


def dollar_matches(source: str) -> list[str]:
    """Patterns compiled with ``$`` at their end (not ``\\s*$``, which means "and blanks"):
    ``match`` or ``search`` with them accept "value\\n"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "compile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            pattern = node.args[0].value
            if pattern.endswith("$") and not pattern.endswith(r"\s*$"):
                found.append(pattern)
    return found


def test_no_validator_pattern_ends_in_a_bare_dollar() -> None:
    bad = {
        str(p.relative_to(PACKAGE)): dollar_matches(p.read_text()) for p in PACKAGE.rglob("*.py")
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_rule_catches_the_old_pattern() -> None:
    assert dollar_matches('import re\nHOST_RE = re.compile(r"^[a-z]{1,255}$")\n')
