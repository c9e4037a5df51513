"""``TrainingWatch.warnings`` (what the train-start check found) and its deprecated alias."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainwatch_lab.integrations.watch import TrainingWatch


def test_the_start_check_fills_warnings_and_alerts_is_a_deprecated_alias(tmp_path: Path) -> None:
    watch = TrainingWatch(on_full="warn")
    watch.begin([tmp_path / "logs"], [tmp_path / "ckpt"])
    try:
        assert watch.checked.wait(20)
        assert watch.warnings == []  # a local tmp directory: nothing to say
        with pytest.warns(DeprecationWarning, match=r"use TrainingWatch\.warnings"):
            alias = watch.alerts
        assert alias is watch.warnings
    finally:
        watch.end()


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"on_ful": "wait"}, TypeError, "unexpected keyword argument 'on_ful'"),
        ({"keep": 0}, ValueError, "keep must be a whole number of saves"),
        ({"fallback": 3}, TypeError, "fallback must be a directory path"),
        ({"on_full": "later"}, ValueError, "on_full must be one of"),
    ],
)
def test_bad_options_are_one_line_at_construction(options, error, says) -> None:
    """The three callbacks hand their options to TrainingWatch as they are (**options): a
    typo is refused there, not silently ignored."""
    with pytest.raises(error, match=says):
        TrainingWatch(**options)


def test_the_save_options_are_what_was_asked_for() -> None:
    watch = TrainingWatch(keep=2, on_full="wait", recheck_s=0.5)
    assert watch.save_options == {"keep": 2, "on_full": "wait", "recheck_s": 0.5}
    assert TrainingWatch(on_full="warn").save_options == {}
