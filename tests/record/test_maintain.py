"""The history stays bounded: old points thinned to per-minute means, then dropped by age or
size, with an event saying what went; a crashed writer's last values are folded in."""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import replace
from pathlib import Path

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.record import Store
from trainwatch_lab.core.record.maintain import maintain

DAY = 86_400.0
NOW = 1_800_000_000.0


def _fill(store: Store, days: float, step: float, keys: list[str]) -> None:
    """Closed blocks of 300 points (any size does) from ``days`` ago until now, a sine per key."""
    t = NOW - days * DAY
    while t < NOW:
        ts = [t + i * step for i in range(300) if t + i * step < NOW]
        cols = {k: (ts, [50 + 40 * math.sin(x / 3600 + j) for x in ts]) for j, k in enumerate(keys)}
        store.close_blocks(cols)
        t += 300 * step


def test_old_points_are_thinned_then_dropped_with_an_event(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    keys = ["disk:sda:util", "gpu:0:util_pct"]
    _fill(store, 8, 10.0, keys)
    maintain(store, NOW)
    times, values = store.read(["disk:sda:util"], 0, 2e9)["disk:sda:util"]
    # dropped by whole blocks: a thinned block holds record_block_points minutes
    span = DEFAULTS.record_block_points * 60
    assert NOW - 7 * DAY - span <= times[0] < NOW - 7 * DAY + span
    old = [t for t in times if t < NOW - DAY - 3000]  # past the block that straddles the day
    recent = [t for t in times if t > NOW - DAY + 600]
    steps_old = {round(b - a) for a, b in itertools.pairwise(old)}
    steps_recent = {round(b - a) for a, b in itertools.pairwise(recent)}
    assert steps_old == {60} and steps_recent == {10}
    assert all(9.9 < v < 90.1 for v in values)  # means of the sine, not garbage
    dropped = store.events(0, 2e9, kinds=["history-dropped"])
    assert len(dropped) == 1 and "older than 7 days" in dropped[0].text
    tiers = dict(store.con.execute("SELECT tier, min(t0) FROM blocks GROUP BY tier").fetchall())
    assert tiers[1] < NOW - DAY - 3000 < tiers[0] < NOW - DAY  # one block straddles the day
    _fill_from = NOW + 2 * span  # later, the next pass drops another block: the same event
    store.close_blocks({"disk:sda:util": ([NOW + 10], [1.0])})
    maintain(store, _fill_from)
    again = store.events(0, 2e9, kinds=["history-dropped"])
    assert len(again) == 1 and again[0].t == _fill_from
    store.close()


def test_the_size_cap_thins_closer_to_now_then_drops_the_oldest(tmp_path: Path) -> None:
    cap = 96 * 1024  # (an empty store takes ~50 KiB) less than the thinned days: the oldest go
    defaults = replace(DEFAULTS, record_max_bytes=cap)
    store = Store(str(tmp_path / "h.sqlite"), role="t", defaults=defaults)
    store.register()
    keys = [f"disk:d{i}:util" for i in range(12)]
    _fill(store, 6, 10.0, keys)
    assert store.used_bytes() > cap
    done = maintain(store, NOW)
    assert "made room under the size cap" in done
    assert store.used_bytes() <= cap
    store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert os.path.getsize(store.path) <= cap  # the pages went back to the filesystem
    reasons = [e.text for e in store.events(0, 2e9, kinds=["history-dropped"])]
    assert reasons and all("size cap" in r or "older than" in r for r in reasons)
    times, _ = store.read(["disk:d0:util"], NOW - 3600, NOW)["disk:d0:util"]
    assert len(times) > 300  # the last hour is still there at its recorded step
    store.close()
