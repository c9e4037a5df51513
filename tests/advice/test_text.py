"""The one place numbers become words: sizes, rates, latencies, durations."""

from __future__ import annotations

import math

import pytest

from trainwatch_lab.advice.text import (
    fmt_bytes,
    fmt_clock,
    fmt_duration,
    fmt_ms,
    fmt_pct,
    fmt_rate,
    warning_count_text,
)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (int(11.2 * 1024**3), "11.2 GiB"),
        (int(5.25 * 1024**3), "5.25 GiB"),
        (int(99.99 * 1024**2), "100 MiB"),
        (3 * 1024**4, "3 TiB"),
        (-2 * 1024**3, "-2 GiB"),
        (None, "?"),
        (math.nan, "?"),
    ],
)
def test_fmt_bytes(n, text) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(
    ("bps", "text"),
    [
        (0, "0 B/s"),
        (950, "950 B/s"),
        (45e6, "45 MB/s"),
        (1.234e6, "1.23 MB/s"),
        (12.3e9, "12.3 GB/s"),
        (64 * 1024, "65.5 kB/s"),
        (None, "?"),
        (math.inf, "?"),
    ],
)
def test_fmt_rate_is_decimal(bps, text) -> None:
    assert fmt_rate(bps) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0.4 s"),
        (5, "5 s"),
        (45, "45 s"),
        (59.6, "1 min"),
        (200, "3 min 20 s"),
        (3600, "1 h"),
        (7500, "2 h 5 min"),
        (90000, "1 d 1 h"),
        (-3, "0 s"),
        (None, "?"),
    ],
)
def test_fmt_duration(seconds, text) -> None:
    assert fmt_duration(seconds) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0.005, "5 µs"), (0.81, "0.81 ms"), (38.2, "38.2 ms"), (1200, "1.2 s"), (None, "?")],
)
def test_fmt_ms(ms, text) -> None:
    assert fmt_ms(ms) == text


def test_fmt_pct_and_clock() -> None:
    assert fmt_pct(0.052) == "5.2 %"
    assert fmt_pct(0.5) == "50 %"
    assert fmt_pct(0) == "0 %"
    assert fmt_pct(None) == "?"
    assert len(fmt_clock(0)) == 5 and fmt_clock(0)[2] == ":"


@pytest.mark.parametrize(
    ("severities", "text"),
    [
        ([], "no warnings"),
        (["warning"], "1 warning"),
        (["critical", "warning"], "2 warnings"),
        (["warning", "info"], "1 warning, 1 note"),  # gpu-unavailable was counted as a warning
        (["info"], "no warnings, 1 note"),
        (["critical", "warning", "info", "info"], "2 warnings, 2 notes"),
    ],
)
def test_warning_count_text_counts_info_as_notes(severities: list[str], text: str) -> None:
    assert warning_count_text(severities) == text
    assert warning_count_text(iter(severities)) == text  # a generator is counted once
