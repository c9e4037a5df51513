from __future__ import annotations

import threading
import time

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


class Blocking:
    """A source stuck as on a dead mount until released."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def collect(self, sample: Sample) -> None:
        self.entered.set()
        self.release.wait(10)


class Where:
    name = "where"

    def __init__(self) -> None:
        self.threads: list[str] = []

    def collect(self, sample: Sample) -> None:
        self.threads.append(threading.current_thread().name)


def test_tick_now_takes_a_sample_at_once_on_the_sampler_thread() -> None:
    """A cell that ends between two ticks gets its sample now, not an interval later."""
    where = Where()
    s = Sampler([Counting(), where], interval=60)
    first = threading.Event()
    s.subscribe(lambda sample: first.set())
    with s:
        assert first.wait(5)  # the tick every start takes; the next is 60 s away
        asked = time.time()
        took = time.monotonic()
        sample = s.tick_now(timeout=10)
        assert sample is not None and sample.t >= asked  # it began after we asked
        assert time.monotonic() - took < 5  # not the 60 s interval
        assert s.history.latest is sample and "x" in sample.disks
        assert where.threads and set(where.threads) == {"trainwatch-sampler"}
        again = s.tick_now(timeout=10)  # a second request is a new sample
        assert again is not None and again.t > sample.t
        time.sleep(0.2)
        assert s.ticks == 3  # the first tick, then the two asked for: no burst after them


def test_tick_now_is_bounded_when_a_source_hangs() -> None:
    stuck = Blocking()
    s = Sampler([stuck], interval=60)
    try:
        s.start()
        assert stuck.entered.wait(5)
        took = time.monotonic()
        assert s.tick_now(timeout=0.3) is None  # the thread is stuck: we are not
        assert time.monotonic() - took < 2
        stuck.release.set()
        assert s.tick_now(timeout=10) is not None  # and it answers again once freed
    finally:
        stuck.release.set()
        s.stop()


def test_tick_now_without_a_thread_and_after_stop() -> None:
    s = Sampler([Counting()], interval=60)
    took = time.monotonic()
    assert s.tick_now(timeout=5) is None  # never started: nothing to ask
    stuck = Blocking()
    s2 = Sampler([stuck], interval=60).start()
    assert stuck.entered.wait(5)
    got: list[Sample | None] = []
    waiter = threading.Thread(target=lambda: got.append(s2.tick_now(timeout=30)))
    waiter.start()
    time.sleep(0.1)
    s2.stop(timeout=0.1)  # a request still waiting is let go at once
    waiter.join(5)
    stuck.release.set()
    assert got == [None] and time.monotonic() - took < 5


class Relaying:
    """A source that relays another sampler's samples (an attached kernel's HubSource)."""

    name = "relay"

    def __init__(self) -> None:
        self.fresh_asked = 0

    def want_fresh(self) -> None:
        self.fresh_asked += 1

    def collect(self, sample: Sample) -> None:
        pass


def test_a_tick_someone_waits_for_asks_relaying_sources_for_a_fresh_sample() -> None:
    relay = Relaying()
    sampler = Sampler([relay], interval=3600)
    sampler.tick()
    assert relay.fresh_asked == 0  # a plain tick relays what it has
    with sampler:
        assert sampler.tick_now(timeout=30) is not None
    assert relay.fresh_asked >= 1


def test_a_poke_ticks_now_without_asking_for_a_fresh_relay() -> None:
    """An attached kernel's sampler ticks on each server sample (poke): at once, and without
    asking the server for yet another sample (want_fresh is for a waiting surface only)."""
    relay = Relaying()
    ticked = threading.Event()
    with Sampler([relay], interval=3600) as sampler:
        deadline = time.monotonic() + 30
        while sampler.ticks < 1 and time.monotonic() < deadline:  # the first tick, at start
            time.sleep(0.01)
        sampler.subscribe(lambda _s: ticked.set())
        sampler.poke()
        assert ticked.wait(30)
    assert sampler.ticks >= 2 and relay.fresh_asked == 0
