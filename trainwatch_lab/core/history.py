"""A bounded columnar ring buffer of numeric series, so memory stays flat however long we run.

Each Sample is flattened into ``(kind, name, field) -> float`` columns ("disk", "sda", "util").
All columns share one time axis; a column that did not exist yet, or is missing from a
sample, holds NaN there.
"""

from __future__ import annotations

import csv
import io
import json
import math
import threading
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from .defaults import DEFAULTS, Defaults
from .model import ProcessIO, Sample

SeriesKey = tuple[str, str, str]
NAMED_BY_PATH = ("path", "wait")  # series kinds whose name is a path
SWEEP_EVERY = 64  # samples between two sweeps of series with nothing left in the ring
NAN = float("nan")


def flatten(sample: Sample) -> Iterator[tuple[SeriesKey, float]]:
    """Yield every numeric value of a sample under its series key."""
    for name, d in sample.disks.items():
        yield ("disk", name, "r_s"), d.r_s
        yield ("disk", name, "w_s"), d.w_s
        yield ("disk", name, "rmb_s"), d.rmb_s
        yield ("disk", name, "wmb_s"), d.wmb_s
        yield ("disk", name, "r_await"), d.r_await
        yield ("disk", name, "w_await"), d.w_await
        yield ("disk", name, "aqu_sz"), d.aqu_sz
        yield ("disk", name, "util"), d.util
    for path, p in sample.paths.items():
        for fld in ("total_bytes", "free_bytes", "avail_bytes", "inodes_free"):
            value = getattr(p, fld)
            if value is not None:
                yield ("path", path, fld), float(value)
        yield ("path", path, "responsive"), 1.0 if p.responsive else 0.0
        if p.probe is not None and p.probe.p50_ms is not None:
            yield ("path", path, "probe_p50_ms"), p.probe.p50_ms
    for g in sample.gpus:
        name = str(g.index)
        for fld in (
            "util_pct",
            "mem_util_pct",
            "mem_used_bytes",
            "mem_total_bytes",
            "power_w",
            "temp_c",
            "pcie_rx_bps",
            "pcie_tx_bps",
            "process_mem_bytes",
        ):
            value = getattr(g, fld)
            if value is not None:
                yield ("gpu", name, fld), float(value)
    if sample.process is not None:
        pr = sample.process
        yield ("proc", str(pr.pid), "read_chars_s"), pr.read_chars_s
        yield ("proc", str(pr.pid), "write_chars_s"), pr.write_chars_s
        yield ("proc", str(pr.pid), "read_bytes_s"), pr.read_bytes_s
        yield ("proc", str(pr.pid), "write_bytes_s"), pr.write_bytes_s
        yield from _waits(pr)


def _waits(pr: ProcessIO) -> Iterator[tuple[SeriesKey, float]]:
    """Time lost to storage (core.processes.waits): ``("wait", path, "main")`` and ``"workers"``,
    and
    per system call ``"main:fsync"``, so a cell or a chart window can total them."""
    for side, waits, calls in (
        ("main", pr.waits, pr.wait_calls),
        ("workers", pr.worker_waits, pr.worker_wait_calls),
    ):
        for path, fraction in waits.items():
            yield ("wait", path, side), fraction
        for path, by_call in calls.items():
            for call, fraction in by_call.items():
                yield ("wait", path, f"{side}:{call}"), fraction
    if pr.waits_elsewhere is not None:
        yield ("proc", str(pr.pid), "wait_elsewhere"), pr.waits_elsewhere
    if pr.wait_other is not None:
        yield ("proc", str(pr.pid), "wait_other"), pr.wait_other


def capacity_for(seconds: float, interval: float, defaults: Defaults = DEFAULTS) -> int:
    """Samples needed to keep ``seconds`` at ``interval``, capped so that no option can make
    the ring (one float per sample per series) grow without bound."""
    return max(2, min(defaults.max_history_samples, math.ceil(seconds / interval)))


def key_to_str(key: SeriesKey) -> str:
    return ":".join(key)


def str_to_key(text: str) -> SeriesKey:
    kind, rest = text.split(":", 1)
    name, fld = rest.rsplit(":", 1)
    return (kind, name, fld)


class History:
    """Fixed-capacity ring of samples stored as columns (``array('d')``), thread-safe."""

    def __init__(self, capacity: int = 3600, max_series: int = 1024) -> None:
        if capacity < 2:
            raise ValueError("history capacity must be at least 2 samples")
        self.capacity = capacity
        self.max_series = max_series
        self._t = array("d", [NAN]) * capacity
        self._cols: dict[SeriesKey, array] = {}
        self._last_seen: dict[SeriesKey, int] = {}  # absolute sample number
        self._n = 0  # samples ever appended
        self._lock = threading.Lock()
        self.latest: Sample | None = None

    # -- writing ---------------------------------------------------------------------
    def append(self, sample: Sample) -> None:
        with self._lock:
            slot = self._n % self.capacity
            self._t[slot] = sample.t
            cols, seen, n = self._cols, self._last_seen, self._n
            written = 0
            for key, value in flatten(sample):
                col = cols.get(key)
                if col is None:
                    if len(cols) >= self.max_series and not self._evict():
                        continue
                    col = cols[key] = array("d", [NAN]) * self.capacity
                if seen.get(key) != n:  # the same key twice in one sample counts once
                    written += 1
                col[slot] = value
                seen[key] = n
            if written < len(cols):  # some series have no value this time: a gap there
                for key, col in cols.items():
                    if seen[key] != n:
                        col[slot] = NAN
                if n % SWEEP_EVERY == 0:
                    self._sweep()
            self._n += 1
            self.latest = sample

    def forget(self, name: str) -> None:
        """Drop every series of ``name`` (a path no longer watched): what the history holds
        follows what is watched now, not everything ever watched."""
        with self._lock:
            for key in [k for k in self._cols if k[1] == name and k[0] in NAMED_BY_PATH]:
                del self._cols[key]
                del self._last_seen[key]

    def _sweep(self) -> None:
        """Drop the series with no value left in the ring (a vanished device or path)."""
        oldest_kept = self._n - self.capacity
        for key in [k for k, seen in self._last_seen.items() if seen < oldest_kept]:
            del self._cols[key]
            del self._last_seen[key]

    def _evict(self) -> bool:
        """Drop one column that has no value left in the ring (a vanished device)."""
        oldest_kept = self._n - self.capacity
        for key, seen in self._last_seen.items():
            if seen < oldest_kept:
                del self._cols[key]
                del self._last_seen[key]
                return True
        return False

    # -- reading ---------------------------------------------------------------------
    def __len__(self) -> int:
        return min(self._n, self.capacity)

    def _first_index(self, since: float | None) -> int:
        """Logical index (0 = oldest kept) of the first sample with t > since (binary search)."""
        count = len(self)
        first = self._n - count
        lo, hi = 0, count
        if since is not None:
            while lo < hi:
                mid = (lo + hi) // 2
                if self._t[(first + mid) % self.capacity] > since:
                    hi = mid
                else:
                    lo = mid + 1
        return lo

    def _ranges(self, since: float | None) -> list[tuple[int, int]]:
        """Physical ``[start, stop)`` slot ranges in time order for t > since: at most two,
        since the ring wraps at most once. Slicing a range is much cheaper than indexing
        slot by slot, and the detectors read a window of every series every tick."""
        count = len(self)
        skip = self._first_index(since)
        length = count - skip
        if length <= 0:
            return []
        begin = (self._n - count + skip) % self.capacity
        if begin + length <= self.capacity:
            return [(begin, begin + length)]
        return [(begin, self.capacity), (0, begin + length - self.capacity)]

    def _slice(self, col: array, ranges: list[tuple[int, int]]) -> list[float]:
        out: list[float] = []
        for start, stop in ranges:
            out.extend(col[start:stop])
        return out

    def keys(self, kind: str | None = None) -> list[SeriesKey]:
        with self._lock:
            return [k for k in self._cols if kind is None or k[0] == kind]

    def times(self, since: float | None = None) -> list[float]:
        with self._lock:
            return self._slice(self._t, self._ranges(since))

    def series(
        self, kind: str, name: str, fld: str, since: float | None = None
    ) -> tuple[list[float], list[float]]:
        """Times and values of one column after ``since``; NaN entries are dropped."""
        with self._lock:
            col = self._cols.get((kind, name, fld))
            if col is None:
                return [], []
            ranges = self._ranges(since)
            ts, vs = self._slice(self._t, ranges), self._slice(col, ranges)
        if not any(map(math.isnan, vs)):  # the usual case: no gap to drop
            return ts, vs
        pairs = [(t, v) for t, v in zip(ts, vs, strict=True) if v == v]  # NaN != NaN
        return [t for t, _ in pairs], [v for _, v in pairs]

    def window(
        self, kind: str, name: str, fld: str, seconds: float, now: float | None = None
    ) -> tuple[list[float], list[float]]:
        """The last ``seconds`` of one column (relative to ``now`` or the newest sample)."""
        with self._lock:
            if now is None:
                now = self._t[(self._n - 1) % self.capacity] if self._n else 0.0
        return self.series(kind, name, fld, since=now - seconds)

    def columns(
        self,
        since: float | None = None,
        keys: Iterable[SeriesKey] | None = None,
        max_points: int | None = None,
    ) -> dict[str, Any]:
        """``{"t": [...], "series": {"kind:name:field": [...]}, "stride": k}`` with NaN as None
        (JSON-safe). With ``max_points``, every k-th sample only (the newest always in), so
        that a reply stays bounded however long the history (issue 34: 3.2 MB each)."""
        with self._lock:
            ranges = self._ranges(since)
            t = self._slice(self._t, ranges)
            stride = 1 if not max_points or len(t) <= max_points else -(-len(t) // max_points)
            first = (len(t) - 1) % stride if t else 0
            wanted = list(self._cols) if keys is None else [k for k in keys if k in self._cols]
            out: dict[str, list[float | None]] = {}
            for key in wanted:
                values = self._slice(self._cols[key], ranges)[first::stride]
                out[key_to_str(key)] = [None if v != v else v for v in values]
            return {"t": t[first::stride], "series": out, "stride": stride}

    # -- export ----------------------------------------------------------------------
    def to_json(self, since: float | None = None) -> str:
        return json.dumps(self.columns(since), allow_nan=False)

    def to_csv(self, since: float | None = None) -> str:
        cols = self.columns(since)
        names = sorted(cols["series"])
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["t", *names])
        for i, t in enumerate(cols["t"]):
            row = [cols["series"][n][i] for n in names]
            writer.writerow([f"{t:.3f}", *("" if v is None else f"{v:.6g}" for v in row)])
        return buf.getvalue()
