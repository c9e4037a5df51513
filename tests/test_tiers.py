"""The quick tier leaves out exactly what needs root, a mount, a browser, a framework, a kernel
or a service, judged from what each test uses (tests/support/tiers.py)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
pytest_plugins = ["tests.support.tiers"]

@pytest.fixture
def tmpfs_mount():
    return None

@pytest.fixture
def prometheus():
    return None
"""

TESTS = """
import pytest
from tests.support.env import need_root
from tests.support.lab import jupyter_lab

def test_plain():
    pass

def test_mounts(tmpfs_mount):
    pass

def test_calls_need_root():
    if False:
        need_root()

def other_user():
    need_root("needs root to add a user")

@pytest.fixture
def as_other_user():
    return other_user()

def test_uses_a_fixture_that_needs_root(as_other_user):
    pass

def test_calls_a_helper_that_needs_root():
    if False:
        other_user()

def test_calls_only_a_method_of_that_name(tmp_path):
    tmp_path.other_user()

def test_queries_prometheus(prometheus):
    pass

@pytest.mark.slow
def test_marked_by_hand():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_browser_module=TESTS)
    pytester.makeini(
        "[pytest]\nmarkers =\n    root\n    mount\n    browser\n    framework\n"
        "    kernel\n    service\n    slow\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.syspathinsert(str(pytest.importorskip("tests").__path__[0] + "/.."))
    return pytester


def test_the_quick_tier_keeps_only_what_needs_nothing_heavy(suite: pytest.Pytester) -> None:
    """The module imports the browser helpers, so all its tests count as browser tests but
    one kind of heaviness is enough: with the import gone, only test_plain stays quick."""
    quick = suite.runpytest("-m", "not slow", "--co", "-q")
    assert not [line for line in quick.stdout.lines if "::" in line]


def test_each_marker_follows_from_what_the_test_uses(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_browser_module=TESTS.replace("from tests.support.lab import jupyter_lab\n", "")
    )
    quick = suite.runpytest("-m", "not slow", "--co", "-q")
    assert [line for line in quick.stdout.lines if "::" in line] == [
        "test_browser_module.py::test_plain",
        "test_browser_module.py::test_calls_only_a_method_of_that_name",
    ]
    for marker, expected in {
        "mount": ["test_mounts"],
        "root": [
            "test_mounts",
            "test_calls_need_root",
            "test_uses_a_fixture_that_needs_root",
            "test_calls_a_helper_that_needs_root",
        ],
        "service": ["test_queries_prometheus"],
    }.items():
        run = suite.runpytest("-m", marker, "--co", "-q")
        assert [line.split("::")[1] for line in run.stdout.lines if "::" in line] == expected
