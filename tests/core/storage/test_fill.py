"""core.storage.fill: one fill estimate per filesystem, on series with a known truth."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.storage.fill import FillEstimate, estimate_fill, fill_estimate, is_trend

MB = 1e6


def series(values: list[float], step: float = 1.0) -> tuple[list[float], list[float]]:
    return [i * step for i in range(len(values))], values


def test_too_few_readings_are_measuring() -> None:
    assert estimate_fill("/d", *series([5e9, 4e9])).trend == "measuring"


def test_a_steady_fill_gives_rate_time_to_full_and_how_long_it_has_lasted() -> None:
    flat, filling = [5e9] * 20, [5e9 - 10 * MB * i for i in range(1, 41)]
    fill = estimate_fill("/d", *series(flat + filling))
    assert fill.trend == "filling" and fill.filesystem == "/d"
    assert abs(fill.rate_bps - 10 * MB) < 1
    assert abs(fill.seconds_to_full - (5e9 - 400 * MB) / (10 * MB)) < 0.01
    assert fill.trend_s == 40  # since the last reading before the writes began
    assert fill.points == 41


def test_freed_space_starts_a_new_stretch() -> None:
    before = [5e9 - 50 * MB * i for i in range(30)]  # fast, then 3 GB deleted
    after = [before[-1] + 3e9 - 1 * MB * i for i in range(10)]
    fill = estimate_fill("/d", *series(before + after))
    assert fill.trend == "filling" and abs(fill.rate_bps - 1 * MB) < 1
    assert fill.trend_s == 9


def test_space_being_freed() -> None:
    fill = estimate_fill("/d", *series([1e9 + 20 * MB * i for i in range(30)]))
    assert fill.trend == "freeing" and fill.rate_bps < 0


def test_the_estimate_decays_when_writing_stops() -> None:
    """Issue 10: seconds after writes stopped the dashboard still read "filling at 2.89 MB/s,
    full in 3.6 s"."""
    values = [5e9] * 5 + [5e9 - 3 * MB * i for i in range(1, 31)]
    assert estimate_fill("/d", *series(values)).trend == "filling"
    values += [values[-1]] * 2
    assert estimate_fill("/d", *series(values)).trend == "filling"  # one quiet tick: a pause
    values += [values[-1]]
    stopped = estimate_fill("/d", *series(values))
    assert stopped.trend == "steady" and stopped.rate_bps == 0 and stopped.seconds_to_full is None


def test_saves_at_a_cadence_keep_filling_between_saves() -> None:
    values, avail = [], 50e9
    for t in range(300):
        if t % 60 in (0, 1):
            avail -= 0.5e9
        values.append(avail)
    fill = estimate_fill("/d", *series(values))
    assert fill.trend == "filling" and 5 * MB < fill.rate_bps < 30 * MB
    ends = [estimate_fill("/d", *series(values[:t])).seconds_to_full for t in range(242, 300)]
    assert all(b < a for a, b in itertools.pairwise(ends)), ends  # between saves: a countdown


def test_a_drop_after_a_long_silence_is_measured_anew() -> None:
    """Readings older than the fit's window before the last drop (a machine that slept)."""
    fill = estimate_fill("/d", [0.0, 1.0, 2.0, 5000.0], [9e9, 9e9, 9e9, 8e9])
    assert fill.trend == "measuring" and fill.rate_bps is None


def test_two_saves_a_pause_apart_are_no_cadence() -> None:
    """Issue 23: a burst, a pause, one small file: the fit averaged the burst into a rate
    nothing was writing at ("full in 10 s" for 90 s with free space standing still)."""
    values = [40e6] * 10 + [40e6 - 2e6 * i for i in range(1, 11)] + [20e6] * 30
    values += [18.5e6] * 60
    for t in range(35, len(values)):
        fill = estimate_fill("/d", *series(values[:t]))
        assert not is_trend(fill), (t, fill)


def test_wiggles_under_the_noise_floor_do_not_restart_the_stretch() -> None:
    values = [5e9 - 10 * MB * i + (40_000 if i % 7 == 0 else 0) for i in range(60)]
    fill = estimate_fill("/d", *series(values))
    assert fill.trend == "filling" and fill.trend_s >= 58


def test_a_trend_needs_time_in_proportion_to_the_time_left() -> None:
    d = DEFAULTS
    fast = estimate_fill("/d", *series([1e9 - 50 * MB * i for i in range(9)]))
    assert fast.seconds_to_full == 12
    assert not is_trend(fast, d)  # 8 s of filling, 12 s left: could still be one save
    fast = estimate_fill("/d", *series([1e9 - 50 * MB * i for i in range(11)]))
    assert is_trend(fast, d)  # 10 s of filling, 10 s left: warn now
    early = estimate_fill("/d", *series([1e9 - 50 * MB * i for i in range(4)]))
    assert not is_trend(early, d)  # under fill_min_trend_s
    slow = estimate_fill("/d", *series([1e12 - 10 * MB * i for i in range(20)]))
    assert not is_trend(slow, d)  # 19 s against fill_min_span_s = 30
    assert is_trend(slow, replace(d, fill_min_span_s=15))


# -- fill_estimate ------------------------------------------------------------------------
def test_fill_estimate_on_a_steady_decline() -> None:
    t0 = 1.7e9  # epoch seconds: centring must keep the fit precise
    times = [t0 + i for i in range(100)]
    avail = [5e9 - 2e6 * i for i in range(100)]
    est = fill_estimate(times, avail)
    assert isinstance(est, FillEstimate) and est.points == 100
    assert est.rate_bps == pytest.approx(2e6)
    assert est.seconds_to_full == pytest.approx((5e9 - 2e6 * 99) / 2e6)


def test_fill_estimate_sees_through_noise() -> None:
    rng = random.Random(7)
    times = [i * 0.5 for i in range(240)]
    avail = [1e10 - 1e7 * t + rng.gauss(0, 5e7) for t in times]
    est = fill_estimate(times, avail)
    assert est is not None
    assert est.rate_bps == pytest.approx(1e7, rel=0.05)
    assert est.seconds_to_full == pytest.approx(avail[-1] / est.rate_bps)


def test_fill_estimate_when_space_is_freed_or_flat() -> None:
    growing = fill_estimate([0, 1, 2, 3], [100, 200, 300, 400])
    assert growing is not None and growing.rate_bps == pytest.approx(-100)
    assert growing.seconds_to_full is None
    flat = fill_estimate([0, 1, 2], [5, 5, 5])
    assert flat is not None and flat.rate_bps == 0 and flat.seconds_to_full is None


def test_fill_estimate_needs_two_points_and_a_time_spread() -> None:
    assert fill_estimate([], []) is None
    assert fill_estimate([1.0], [10.0]) is None
    assert fill_estimate([3.0, 3.0, 3.0], [30.0, 20.0, 10.0]) is None


def test_fill_estimate_uses_the_latest_reading_even_if_unsorted() -> None:
    est = fill_estimate([2, 0, 1], [80, 100, 90])
    assert est is not None and est.seconds_to_full == pytest.approx(80 / 10)
