"""monitor.make_sampler: the one Sampler every surface uses, on a real directory."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from trainwatch_lab.advice.advisor import Advisor
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.monitor import make_sampler


def test_sources_in_order_and_history_sized_from_defaults() -> None:
    sampler = make_sampler(interval=0.5, probe=False, gpu=False)
    try:
        names = [s.name for s in sampler.sources]
        assert names[:3] == ["paths", "disks", "process"]
        assert names == [
            n for n in ["paths", "disks", "process", "main_thread", "gpus"] if n in names
        ]
        assert sampler.interval == 0.5
        assert sampler.history.capacity == math.ceil(DEFAULTS.history_s / 0.5)
        assert isinstance(sampler.evaluate, Advisor)
    finally:
        sampler.close()


def test_watched_path_flows_into_samples_history_and_advice(tmp_path: Path) -> None:
    tiny = replace(DEFAULTS, full_fraction=1.0)  # any free space counts as "almost full"
    sampler = make_sampler(probe=False, gpu=False, defaults=tiny, history_capacity=10)
    try:
        key = sampler.find_source("paths").add(str(tmp_path))
        assert key == str(tmp_path)
        sampler.tick()
        sample = sampler.tick()
        state = sample.paths[key]
        assert state.exists and state.total_bytes and state.avail_bytes is not None
        times, avail = sampler.history.series("path", key, "avail_bytes")
        assert len(times) == 2 and avail[-1] == state.avail_bytes
        assert ("disk-almost-full", key) in {a.key for a in sample.warnings}
        assert sampler.history.capacity == 10
    finally:
        sampler.close()


@pytest.mark.parametrize("interval", [0, -1, math.nan, math.inf])
def test_bad_interval(interval: float) -> None:
    with pytest.raises(ValueError, match="interval"):
        make_sampler(interval=interval)
