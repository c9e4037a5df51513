"""Human formatting of sizes, rates, latencies and durations, in one place.

Warning messages, the CLI table and the notebook all format numbers through these functions,
so a user never sees "11.2 GiB" in one place and "12.0 GB" for the same disk in another.
Sizes use binary units (KiB, MiB, GiB: what ``df -h`` means); transfer rates use decimal
units (kB/s, MB/s, GB/s: what disk and network vendors quote).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core.defaults import DEFAULTS

if TYPE_CHECKING:
    from ..core.model import FillState, PathState

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_DECIMAL_RATE = ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")


def _number(value: float) -> str:
    """Three significant digits at most, no trailing ".0" on values >= 100."""
    if value >= 100:
        return f"{value:.0f}"
    text = f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scaled(value: float | None, base: float, units: tuple[str, ...]) -> str:
    """``value`` in the largest unit of ``units`` (each ``base`` times the previous) that
    keeps it at or above 1; ``"?"`` when unknown."""
    if value is None or not math.isfinite(value):
        return "?"
    sign = "-" if value < 0 else ""
    scaled = abs(float(value))
    unit = 0
    while scaled >= base and unit < len(units) - 1:
        scaled /= base
        unit += 1
    if unit == 0:
        return f"{sign}{round(scaled)} {units[0]}"
    return f"{sign}{_number(scaled)} {units[unit]}"


def fmt_bytes(n: float | None) -> str:
    """``11.2 GiB`` (binary units); ``"?"`` when unknown."""
    return _scaled(n, 1024, _BINARY)


def fmt_rate(bytes_per_s: float | None) -> str:
    """``45 MB/s`` (decimal units); ``"?"`` when unknown."""
    return _scaled(bytes_per_s, 1000, _DECIMAL_RATE)


def fmt_mbs(bytes_per_s: float | None) -> str:
    """Always in MB/s (``0.57 MB/s``, ``45 MB/s``): where rates sit side by side (the
    headline, the charts) one unit reads at a glance; ``"?"`` when unknown."""
    if bytes_per_s is None or not math.isfinite(bytes_per_s):
        return "?"
    mbs = bytes_per_s / 1e6
    if mbs == 0:
        return "0 MB/s"
    return f"{_number(mbs) if mbs >= 0.01 else '<0.01'} MB/s"


def fmt_ms(ms: float | None) -> str:
    """A latency: ``0.81 ms``, ``38 ms``, ``1.2 s``; ``"?"`` when unknown."""
    if ms is None or not math.isfinite(ms):
        return "?"
    if ms >= 1000:
        return f"{_number(ms / 1000)} s"
    if ms < 0.01:
        return f"{ms * 1000:.0f} µs"
    return f"{_number(ms)} ms"


def fmt_duration(seconds: float | None) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 5 min``, ``3 d 4 h``; ``"?"`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    if seconds < 0:
        return "0 s"
    if seconds < 10:
        return f"{_number(round(seconds, 1))} s"
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        m, s = divmod(total, 60)
        return f"{m} min {s} s" if s else f"{m} min"
    total = round(seconds / 60)
    if total < 24 * 60:
        h, m = divmod(total, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    total = round(seconds / 3600)
    d, h = divmod(total, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def fmt_pct(fraction: float | None) -> str:
    """A fraction (0.052) as ``5.2 %``."""
    if fraction is None or not math.isfinite(fraction):
        return "?"
    pct = fraction * 100
    return f"{pct:.0f} %" if pct >= 10 or pct == 0 else f"{pct:.1f} %"


def free_fraction(p: PathState) -> float | None:
    """The share of the disk still free as df counts it, avail / (used + avail): 100 % less
    df's Use%."""
    used = p.used_bytes
    if used is None or p.avail_bytes is None or used + p.avail_bytes <= 0:
        return None
    return p.avail_bytes / (used + p.avail_bytes)


def reserved_text(p: PathState) -> str:
    """``5 % reserved for root`` when that much of the disk is free only to root, else ""."""
    reserved = p.reserved_bytes
    if not reserved or not p.total_bytes:
        return ""
    share = reserved / p.total_bytes
    shown = share >= DEFAULTS.reserved_shown_fraction
    return f"{fmt_pct(share)} reserved for root" if shown else ""


def space_text(p: PathState) -> str:
    """``4 MiB free of 40 MiB (90 % used)``: free is what a user can write, used % is df's
    Use%, and reserved space is named when it matters (every surface words it so)."""
    used = p.used_fraction
    if p.avail_bytes is None or not p.total_bytes or used is None:
        return "free space: ?"
    reserved = reserved_text(p)
    return (
        f"{fmt_bytes(p.avail_bytes)} free of {fmt_bytes(p.total_bytes)} "
        f"({fmt_pct(used)} used{'; ' + reserved if reserved else ''})"
    )


def fmt_clock(epoch_s: float) -> str:
    """Local wall-clock time of day, ``14:05``, for "full at about ..."."""
    return time.strftime("%H:%M", time.localtime(epoch_s))


def warning_count_text(severities: Iterable[str]) -> str:
    """How many warnings a surface shows, from their severities: ``warning`` and
    ``critical`` count as warnings, ``info`` as notes (gpu-unavailable on a CPU machine is
    no reason to worry): ``no warnings``, ``1 warning, 1 note``, ``no warnings, 2 notes``."""
    levels = list(severities)
    notes = levels.count("info")
    warnings = len(levels) - notes
    text = f"{warnings} warning{'s' if warnings != 1 else ''}" if warnings else "no warnings"
    return f"{text}, {notes} note{'s' if notes != 1 else ''}" if notes else text


def fill_text(fill: FillState | None) -> str:
    """A filesystem's fill as every surface words it (core.storage.fill computes it once per
    tick)."""
    if fill is None:
        return "fill rate: unknown"
    if fill.trend == "filling" and fill.rate_bps is not None:
        return f"filling at {fmt_rate(fill.rate_bps)}, full in {fmt_duration(fill.seconds_to_full)}"
    if fill.trend == "filling":  # core.storage.fill.believed: no trend yet, so no numbers
        return "space going down (no trend yet)"
    if fill.trend == "freeing" and fill.rate_bps is not None:
        return f"being freed at {fmt_rate(-fill.rate_bps)}"
    if fill.trend == "measuring":
        return "fill rate: measuring"
    return "not filling"


def fill_columns(fill: FillState | None) -> tuple[str, str]:
    """The same fill as two table cells, FILL RATE and FULL IN (``watch``)."""
    if fill is not None and fill.trend == "filling" and fill.rate_bps is None:
        return "going down", "-"  # no trend yet (core.storage.fill.believed)
    if fill is None or fill.rate_bps is None or fill.trend in ("measuring", "steady"):
        return ("-" if fill is None or fill.trend == "measuring" else "steady"), "-"
    if fill.trend == "freeing":
        return f"-{fmt_rate(-fill.rate_bps)}", "-"
    return f"+{fmt_rate(fill.rate_bps)}", fmt_duration(fill.seconds_to_full)
