"""One column block: times and values of one series, delta/varint encoded, then zlib.

Why this layout: a recorded series is mostly flat (an idle disk at 0 %, free space that
moves in 4 KiB steps, a tick every second), so the differences between neighbours are
small integers that take one varint byte each and zlib folds the runs; that is what keeps a
stored value under a byte (tests/benchmarks/bench_record.py measures it).

Times are integer milliseconds: the first absolute, then the change of the step (0 while
the ticks are regular). Values are quantised before they are differenced: byte counts of a
filesystem to ``BYTES_QUANTUM`` (free space is a whole number of blocks), everything else
to ``SIGNIFICANT`` significant digits of the block's largest magnitude, the resolution of a
chart. A NaN is one token of its own, so a gap stays a gap.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

VERSION = 1
SIGNIFICANT = 3  # 0.1 % of the block's largest value: finer than a chart's pixel
BYTES_QUANTUM = 4096.0
EXACT_FIELDS = ("total_bytes", "free_bytes", "avail_bytes")  # filesystem sizes: 4 KiB steps
COUNT_FIELDS = ("inodes_free", "responsive")  # whole numbers
_HEAD = struct.Struct("<Bd")  # version, quantum


def _varint(out: bytearray, n: int) -> None:
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _zigzag(n: int) -> int:
    return (n << 1) if n >= 0 else ((-n << 1) - 1)


def _unzigzag(n: int) -> int:
    return (n >> 1) if not n & 1 else -((n + 1) >> 1)


def _read_varints(data: bytes, pos: int, count: int) -> tuple[list[int], int]:
    out: list[int] = []
    append = out.append
    for _ in range(count):
        shift = n = 0
        while True:
            byte = data[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
        append(n)
    return out, pos


def quantum_for(field: str, values: Sequence[float]) -> float:
    """The step values of ``field`` are rounded to in one block (see the module doc)."""
    if field in EXACT_FIELDS:
        return BYTES_QUANTUM
    if field in COUNT_FIELDS:
        return 1.0
    biggest = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    if biggest == 0.0:
        return 1.0
    return 10.0 ** (math.floor(math.log10(biggest)) + 1 - SIGNIFICANT)


def encode(times: Sequence[float], values: Sequence[float], field: str = "") -> bytes:
    """A block of ``len(times)`` points (same length as ``values``); see ``decode``."""
    if len(times) != len(values):
        raise ValueError("times and values differ in length")
    quantum = quantum_for(field, values)
    out = bytearray(_HEAD.pack(VERSION, quantum))
    _varint(out, len(times))
    prev_t = prev_step = 0
    for i, t in enumerate(times):
        ms = round(t * 1000.0)
        if i == 0:
            _varint(out, _zigzag(ms))
        else:
            step = ms - prev_t
            _varint(out, _zigzag(step - prev_step))
            prev_step = step
        prev_t = ms
    prev_q = 0
    for v in values:
        if not math.isfinite(v):
            _varint(out, 1)  # NaN (and the infinities no source sends) as a gap
            continue
        q = round(v / quantum)
        _varint(out, _zigzag(q - prev_q) << 1)
        prev_q = q
    return zlib.compress(bytes(out), 6)


def decode(blob: bytes) -> tuple[list[float], list[float]]:
    """(times, values) of a block; NaN where the series had a gap."""
    data = zlib.decompress(blob)
    version, quantum = _HEAD.unpack_from(data)
    if version != VERSION:
        raise ValueError(f"block format {version} is not {VERSION}")
    pos = _HEAD.size
    (count,), pos = _read_varints(data, pos, 1)
    raw_t, pos = _read_varints(data, pos, count)
    raw_v, pos = _read_varints(data, pos, count)
    times: list[float] = []
    ms = step = 0
    for i, z in enumerate(raw_t):
        if i == 0:
            ms = _unzigzag(z)
        else:
            step += _unzigzag(z)
            ms += step
        times.append(ms / 1000.0)
    values: list[float] = []
    q = 0
    nan = math.nan
    for z in raw_v:
        if z & 1:
            values.append(nan)
            continue
        q += _unzigzag(z >> 1)
        values.append(q * quantum)
    return times, values
