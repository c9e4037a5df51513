"""core.record.replay: the window a replay reads (one time parser with the CLI), where the
history is, and the window's series aligned on one time axis with its events and endings."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from trainwatch_lab.cli.history import when
from trainwatch_lab.core.record import Event, Store
from trainwatch_lab.core.record.location import STORE_ENV
from trainwatch_lab.core.record.replay import NoHistory, align, load, moment, store_path, window
from trainwatch_lab.core.usage import parse_when

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    "text, ago",
    [("8h", 8 * 3600), ("30m", 1800), ("2d", 2 * 86400), ("1w", 604800), ("90s", 90)],
)
def test_ages_count_back_from_now(text: str, ago: float) -> None:
    assert parse_when(text, NOW) == NOW - ago
    assert moment(text, "since", NOW) == NOW - ago


def test_the_cli_and_the_notebook_read_a_time_alike() -> None:
    for text in ("2026-12-01T03:00", "03:00", "1800000000", " 8h "):
        cli = when(text)
        assert abs(moment(text, "since") - cli) < 5, text  # (ages: "now" moved a little)
    assert moment(dt.datetime.fromtimestamp(NOW), "since") == NOW
    assert moment(60, "since", NOW) == NOW - 60  # a number: seconds ago


@pytest.mark.parametrize(
    "value, said",
    [
        ("yesterday", "since: expected 8h, 30m, 2d (ago), 2026-12-01T03:00 or 03:00 (today), "),
        ("8h\n1", "since: expected 8h"),
        (-1, "since must be seconds ago (0 or more), got -1"),
        (float("nan"), "since must be seconds ago (0 or more), got nan"),
        (True, "since must be seconds ago, a time like '8h' or '03:00', or a datetime; got True"),
        ([1], "since must be seconds ago"),
    ],
)
def test_a_bad_time_is_one_line(value: object, said: str) -> None:
    with pytest.raises(ValueError) as err:
        moment(value, "since", NOW)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


def test_the_window_is_in_order_and_defaults_like_the_cli() -> None:
    assert window("1h", None, NOW) == (NOW - 3600, NOW)
    assert window(None, 600, NOW) == (NOW - 600 - 86400, NOW - 600)  # a day before its end
    with pytest.raises(ValueError, match=r"^since \(.*\) must be before until \(.*\)$"):
        window("1h", "2h", NOW)


def test_no_history_says_where_it_looked_and_how_to_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "h.sqlite"
    monkeypatch.setenv(STORE_ENV, str(missing))
    with pytest.raises(NoHistory) as err:
        store_path()
    text = str(err.value)
    assert text.startswith(f"no recorded history at {missing}; recording is on by default")
    assert "trainwatch-lab watch --record" in text and "\n" not in text
    assert os.listdir(tmp_path) == []  # looking created nothing


def test_align_puts_every_series_on_one_time_axis() -> None:
    t, cols = align({"a": {"t": [1.0, 3.0], "v": [10, 30]}, "b": {"t": [2.0, 3.0], "v": [2, 3]}})
    assert t == [1.0, 2.0, 3.0]
    assert cols == {"a": [10, None, 30], "b": [None, 2, 3]}


def test_load_reads_the_window_its_events_and_its_endings(tmp_path: Path) -> None:
    path = str(tmp_path / "h.sqlite")
    store = Store(path, role="t")
    store.register()
    end = time.time() - 30
    ts = [end - 100 + i for i in range(100)]
    store.close_blocks(
        {
            "path:/data:avail_bytes": (ts, [0.0] * 100),
            "path:/data:total_bytes": (ts, [1e9] * 100),
            "disk:sda:util": (ts, [50.0] * 100),  # not charted: not read
            "gpu:0:util_pct": (ts[::2], [90.0] * 50),
        }
    )
    data = {"pid": 3, "paths": ["/data"], "exit": {"code": 1}}
    store.add_events([Event(end, "run-ended", "train.py", "train.py (pid 3) ended", data)])
    store.close()
    rec = load(end - 200, end + 10, path)
    assert sorted(rec.series) == [
        "gpu:0:util_pct",
        "path:/data:avail_bytes",
        "path:/data:total_bytes",
    ]
    assert len(rec.t) == 100 and all(len(v) == 100 for v in rec.series.values())
    assert rec.series["gpu:0:util_pct"][1] is None and rec.series["gpu:0:util_pct"][0] == 90.0
    (ending,) = rec.endings
    assert ending["cause"] == "/data was full" and ending["sentence"] in str(rec.endings)
    assert [e["kind"] for e in rec.events] == ["run-ended"]
    assert not rec.truncated
