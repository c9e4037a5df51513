from __future__ import annotations

import csv
import io
import json
import math

from trainwatch_lab.core.history import History, str_to_key
from trainwatch_lab.core.model import DiskRates, PathState, Sample


def sample(t: float, free: int | None = None, dev: str | None = "sda") -> Sample:
    s = Sample(t=t)
    if dev:
        s.disks[dev] = DiskRates(dev, 1, 2, 3, 4, 5, 6, 7, 8.0 + t)
    if free is not None:
        s.paths["/a:b"] = PathState(path="/a:b", free_bytes=free)
    return s


def test_ring_is_bounded_and_ordered() -> None:
    h = History(capacity=5)
    for i in range(12):
        h.append(sample(float(i), free=100 - i))
    assert len(h) == 5
    assert h.times() == [7.0, 8.0, 9.0, 10.0, 11.0]
    ts, vs = h.series("path", "/a:b", "free_bytes")
    assert ts == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert vs == [93.0, 92.0, 91.0, 90.0, 89.0]


def test_since_and_window_queries() -> None:
    h = History(capacity=100)
    for i in range(50):
        h.append(sample(float(i)))
    assert h.times(since=45.0) == [46.0, 47.0, 48.0, 49.0]
    ts, _ = h.window("disk", "sda", "util", seconds=3)
    assert ts == [47.0, 48.0, 49.0]


def test_every_window_matches_a_plain_list_however_the_ring_wraps() -> None:
    """The ring is read as at most two slices; compare with the obvious list model for
    every fill level and every ``since`` (before, inside and after what is kept)."""
    capacity = 7
    for appended in range(1, 3 * capacity):
        h = History(capacity=capacity)
        model: list[tuple[float, float | None]] = []
        for i in range(appended):
            free = None if i % 4 == 3 else 1000 - i  # gaps must stay gaps
            h.append(sample(float(i), free=free))
            model.append((float(i), None if free is None else float(free)))
        kept = model[-capacity:]
        for since in [None, -1.0, *(i + 0.5 for i in range(-1, appended + 1))]:
            want = [(t, v) for t, v in kept if since is None or t > since]
            assert h.times(since) == [t for t, _ in want], (appended, since)
            ts, vs = h.series("path", "/a:b", "free_bytes", since=since)
            assert list(zip(ts, vs, strict=True)) == [(t, v) for t, v in want if v is not None]
            cols = h.columns(since=since)
            assert cols["t"] == [t for t, _ in want]
            if want:
                assert cols["series"]["path:/a:b:free_bytes"] == [v for _, v in want]


def test_missing_values_are_gaps_not_zeros() -> None:
    h = History(capacity=10)
    h.append(sample(0.0, free=10))
    h.append(sample(1.0))  # path missing this tick
    h.append(sample(2.0, free=8))
    ts, vs = h.series("path", "/a:b", "free_bytes")
    assert ts == [0.0, 2.0] and vs == [10.0, 8.0]
    cols = h.columns()
    assert cols["series"]["path:/a:b:free_bytes"] == [10.0, None, 8.0]
    assert str_to_key("path:/a:b:free_bytes") == ("path", "/a:b", "free_bytes")


def test_vanished_series_are_evicted_when_full() -> None:
    h = History(capacity=3, max_series=8)
    h.append(sample(0.0, dev="old"))  # 8 disk series
    for i in range(1, 5):
        h.append(sample(float(i), dev="new"))
    keys = {k[1] for k in h.keys("disk")}
    assert keys == {"new"}


def test_exports() -> None:
    h = History(capacity=10)
    for i in range(3):
        h.append(sample(float(i), free=5 - i))
    data = json.loads(h.to_json())
    assert data["t"] == [0.0, 1.0, 2.0]
    rows = list(csv.reader(io.StringIO(h.to_csv())))
    assert rows[0][0] == "t" and "path:/a:b:free_bytes" in rows[0]
    col = rows[0].index("path:/a:b:free_bytes")
    assert [r[col] for r in rows[1:]] == ["5", "4", "3"]
    assert not any(math.isnan(x) for x in data["t"])


def test_capacity_is_capped_whatever_the_options() -> None:
    from trainwatch_lab.core.defaults import DEFAULTS
    from trainwatch_lab.core.history import capacity_for

    assert capacity_for(3600, 1.0) == 3600
    assert capacity_for(3600, 0.0001) == DEFAULTS.max_history_samples
    assert capacity_for(0.5, 1.0) == 2


def test_a_reply_holds_at_most_max_points_every_kth_with_the_newest_in() -> None:
    """Issue 34: `history?since=0` sent the whole hour (3.2 MB), forty at once held the
    server's loop. The reply is thinned to a bound, columns aligned, the newest kept."""
    h = History(capacity=5000)
    for i in range(3600):
        h.append(sample(float(i), free=i))
    cols = h.columns(max_points=1000)
    assert cols["stride"] == 4 and len(cols["t"]) == 900
    assert cols["t"][-1] == 3599.0 and cols["t"][:2] == [3.0, 7.0]
    (free,) = [v for k, v in cols["series"].items() if k.endswith(":free_bytes")]
    assert free == [float(t) for t in cols["t"]]  # every column thinned the same way
    assert h.columns(since=3500.0, max_points=1000)["stride"] == 1  # short: whole
    assert len(h.columns()["t"]) == 3600  # no bound asked: everything
