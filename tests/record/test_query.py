"""A replay's chart over a long window: memory, decoding and the answer's size stay bounded
(counted, not timed), and the sliced reading gives the same means as reading it whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.record import Store, query
from trainwatch_lab.core.record.maintain import means

SERIES = 12
POINTS = 30_000  # per series: 3.5 days at 10 s, 360,000 points in all
T0 = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]
PEAK = """
import sys, tracemalloc
from dataclasses import replace
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.record import query
path, t0, until, budget = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
defaults = replace(DEFAULTS, record_query_max_decoded=budget)
query.chart(path, t0, t0 + 60.0, None, 500, defaults)  # what it imports on first use: not it
tracemalloc.start()
query.chart(path, t0, until, None, 500, defaults)
print(tracemalloc.get_traced_memory()[1])
"""


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("query") / "h.sqlite"
    store = Store(str(path), role="t")
    store.register()
    n = DEFAULTS.record_block_points
    for start in range(0, POINTS, n):
        ts = [T0 + 10.0 * i for i in range(start, start + n)]
        store.close_blocks(
            {
                f"disk:d{s}:util": (
                    ts,
                    [float((i * (s + 1)) % 97) for i in range(start, start + n)],
                )
                for s in range(SERIES)
            }
        )
    store.close()
    return path


def test_a_long_window_decodes_at_most_the_budget_and_answers_small(long_store: Path) -> None:
    budget = 50_000
    defaults = replace(DEFAULTS, record_query_max_decoded=budget)
    until = T0 + 10.0 * POINTS
    answer = query.chart(str(long_store), T0, until, None, 500, defaults)
    # the peak of the same query in a process of its own, its imports done before: the first
    # query's imports (8 MiB where this test ran first in its process: a flake on 3.10) and
    # other threads' allocations (tracemalloc counts every thread's) are none of its own
    measured = subprocess.run(
        [sys.executable, "-c", PEAK, str(long_store), repr(T0), repr(until), str(budget)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert measured.returncode == 0, measured.stderr
    peak = int(measured.stdout)
    # the budget is checked before each slice: it overshoots by one slice (+ its blocks)
    slice_points = defaults.record_query_slice_s / 10.0 + 2 * DEFAULTS.record_block_points
    assert answer["truncated"] is True
    assert budget <= answer["decoded"] <= budget + slice_points, answer["decoded"]
    assert 0 < len(answer["series"]) < SERIES
    assert all(len(s["t"]) <= 500 for s in answer["series"].values())
    assert len(json.dumps(answer)) < SERIES * 500 * 60
    # one slice at a time: far below what 360,000 points as per-point dicts would take
    assert peak < 8 * 2**20, peak


def test_slices_fold_to_the_same_means_as_the_whole_window(long_store: Path) -> None:
    until = T0 + 10.0 * POINTS
    answer = query.chart(str(long_store), T0, until, "disk:d3:*", 700)
    # a block across a slice's boundary is decoded by both slices
    assert answer["truncated"] is False and POINTS <= answer["decoded"] <= 1.5 * POINTS
    store = Store(str(long_store), readonly=True)
    ts, vs = store.read(["disk:d3:util"], T0, until)["disk:d3:util"]
    store.close()
    want_t, want_v = means(ts, vs, (until - T0) / 700)
    got = answer["series"]["disk:d3:util"]
    assert got["t"] == pytest.approx(want_t) and got["v"] == pytest.approx(want_v)


def test_a_short_window_answers_the_points_as_recorded(long_store: Path) -> None:
    answer = query.chart(str(long_store), T0 + 1000.0, T0 + 2000.0, "disk:d0:*", 1000)
    got = answer["series"]["disk:d0:util"]
    assert got["t"] == [T0 + 10.0 * i for i in range(100, 201)]
