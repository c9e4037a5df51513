"""One validation for both doors: ``TrainWatch(...)`` refuses exactly what ``%trainwatch``
refuses, with one clear line (ValueError/TypeError there, UsageError in the magic)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from trainwatch_lab.notebook.dashboard.widget import TrainWatch
from trainwatch_lab.notebook.options import parse_options
from trainwatch_lab.notebook.settings import as_path_list, check_settings


@pytest.fixture
def made() -> Iterator[list[TrainWatch]]:
    widgets: list[TrainWatch] = []
    yield widgets
    for w in widgets:
        w.close()


def widget(made: list[TrainWatch], *args: Any, **kwargs: Any) -> TrainWatch:
    kwargs.setdefault("probe", False)
    tw = TrainWatch(*args, inline=False, start=False, **kwargs)
    made.append(tw)
    return tw


def test_one_path_as_a_str_or_pathlike_is_one_path(made: list, tmp_path: Path) -> None:
    assert widget(made, paths=str(tmp_path)).paths() == [str(tmp_path)]
    assert widget(made, tmp_path).paths() == [str(tmp_path)]
    assert widget(made, [tmp_path, str(tmp_path / "b")]).paths() == [
        str(tmp_path),
        str(tmp_path / "b"),
    ]
    assert as_path_list("/tmp") == ["/tmp"]


@pytest.mark.parametrize("bad", [b"/tmp", 3, [3], [None]])
def test_paths_of_the_wrong_kind_are_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="path"):
        TrainWatch(bad, inline=False, start=False, probe=False)


def refused_cases(blocker: Path) -> dict[str, tuple[dict[str, Any], str, type, str]]:
    """name -> (widget kwargs, magic line, widget error, words in both messages)."""
    return {
        "path under a file": (
            {"paths": [f"{blocker}/x"]},
            f"{blocker}/x",
            ValueError,
            f"cannot exist: {blocker} is a file",
        ),
        "path under /etc/passwd": (
            {"paths": ["/etc/passwd/x"]},
            "/etc/passwd/x",
            ValueError,
            "cannot exist: /etc/passwd is a file",
        ),
        "empty path": ({"paths": [""]}, "--logdir ''", ValueError, "bad path ''"),
        "window too small": ({"window": 1}, "--window 1", ValueError, "between 10s and 24h"),
        "window too large": ({"window": 2 * 86400}, "--window 48h", ValueError, "between"),
        "interval zero": ({"interval": 0}, "--interval 0", ValueError, "must be more than 0"),
        "interval nan": ({"interval": float("nan")}, "--interval 0", ValueError, "more than 0"),
        "window vs interval": (
            {"window": 10, "interval": 8},
            "--window 10 --interval 8",
            ValueError,
            "at least two samples",
        ),
        "too many samples": (
            {"window": 86400, "interval": 0.1},
            "--window 24h --interval 0.1",
            ValueError,
            "more than 86400 samples",
        ),
    }


CASES = [
    "path under a file",
    "path under /etc/passwd",
    "empty path",
    "window too small",
    "window too large",
    "interval zero",
    "interval nan",
    "window vs interval",
    "too many samples",
]


@pytest.mark.parametrize("name", CASES)
def test_widget_and_magic_refuse_the_same_input(name: str, tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    kwargs, line, error, words = refused_cases(blocker)[name]
    with pytest.raises(error) as widget_err:
        TrainWatch(inline=False, start=False, probe=False, **kwargs)
    with pytest.raises(UsageError) as magic_err:
        parse_options(line)
    for message in (str(widget_err.value), str(magic_err.value)):
        assert words in message
        assert "\n" not in message


@pytest.mark.parametrize("value", ["1", None, True, [1.0]])
def test_interval_and_window_must_be_numbers(value: Any) -> None:
    with pytest.raises(TypeError, match=r"^interval must be a number of seconds, got "):
        TrainWatch(interval=value, inline=False, start=False, probe=False)
    with pytest.raises(TypeError, match=r"^window must be a number of seconds, got "):
        TrainWatch(window=value, inline=False, start=False, probe=False)


def test_empty_logdir_is_refused_not_dropped() -> None:
    with pytest.raises(UsageError, match=r"^trainwatch: bad path ''$"):
        parse_options("--logdir ''")
    with pytest.raises(UsageError, match="bad path ''"):
        parse_options("--logdir= ")


def test_a_shared_sampler_sets_the_interval_the_window_is_checked_against(made: list) -> None:
    from trainwatch_lab.core.history import History
    from trainwatch_lab.core.sampler import Sampler

    sampler = Sampler([], interval=30.0, history=History(capacity=100))
    with pytest.raises(ValueError, match="at least two samples"):
        TrainWatch(sampler=sampler, window=30, inline=False, start=False)
    assert widget(made, sampler=sampler, window=600).window_s == 600.0


def test_the_widget_refuses_an_interval_the_magic_refuses() -> None:
    """One rule for both doors: under min_interval_s sampling costs more than it shows."""
    with pytest.raises(ValueError, match=r"must be at least 0\.05 s, got 0\.01"):
        check_settings([], 0.01, 600.0)
