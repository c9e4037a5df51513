from __future__ import annotations

import threading

import pytest

from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, DiskRates, Sample
from trainwatch_lab.core.sampler import Sampler


class Counting:
    name = "count"

    def __init__(self) -> None:
        self.n = 0

    def collect(self, sample: Sample) -> None:
        self.n += 1
        sample.disks["x"] = DiskRates("x", self.n, 0, 0, 0, 0, 0, 0, 0)


class Broken:
    name = "broken"

    def collect(self, sample: Sample) -> None:
        raise OSError("no such thing")


def test_broken_source_is_data_not_a_crash() -> None:
    src = Counting()
    s = Sampler([Broken(), src], interval=0.01)
    first = s.tick()
    second = s.tick()
    assert src.n == 2
    assert first.notes["broken"] == "OSError: no such thing"
    assert second.notes["broken"] == "OSError: no such thing"
    assert len(s.history) == 2


def test_thread_start_stop_idempotent_and_subscribers() -> None:
    got: list[Sample] = []
    enough = threading.Event()

    def on_sample(sample: Sample) -> None:
        got.append(sample)
        if len(got) >= 3:
            enough.set()

    s = Sampler([Counting()], interval=0.01)
    unsubscribe = s.subscribe(on_sample)
    with s:
        s.start()  # second start is a no-op
        assert enough.wait(5)
        assert s.running
    assert not s.running
    s.stop()  # second stop is a no-op
    n = len(got)
    unsubscribe()
    s.tick()
    assert len(got) == n


def test_evaluate_result_and_failure() -> None:
    def evaluate(sample: Sample, history: History) -> list[Alert]:
        return [Alert("disk-almost-full", "warning", "/x", "m", "f")]

    s = Sampler([Counting()], evaluate=evaluate)
    assert [w.code for w in s.tick().warnings] == ["disk-almost-full"]

    def failing(sample: Sample, history: History) -> list[Alert]:
        raise RuntimeError("bug")

    s2 = Sampler([Counting()], evaluate=failing)
    assert "advice" in s2.tick().notes


def test_bad_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        Sampler([], interval=0)
