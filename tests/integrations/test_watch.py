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
