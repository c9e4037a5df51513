"""TFRecord framing of TensorBoard event files: where records start, and padding records.

Why: a ``local_mirror`` whose local disk fills frees room inside the event files a writer
still holds open (mirror.room). It cannot cut bytes out (the writer's offset must stay), so
it replaces a run of whole records with one padding record of the same length whose payload
is zeros, most of it a punched hole (no blocks). The file stays a valid TFRecord stream:
TensorBoard reads past the padding (an Event with only an unknown field, ignored) to the
records after it; a stream with a hole of bare zeros would stop every reader there.

Record layout (tensorflow/core/lib/io/record_writer.cc): uint64 length, uint32 masked
crc32c of the length, ``length`` bytes of data, uint32 masked crc32c of the data, little
endian. The crc of a long run of zeros is computed with the GF(2) "append zeros" operator
(as zlib's crc32_combine), so a padding record of gigabytes costs microseconds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import cache
from typing import BinaryIO

HEADER = 12  # length (8) + its crc (4)
FOOTER = 4  # the data's crc
OVERHEAD = HEADER + FOOTER
PAD_FIELD = 2047  # the Event field number of the padding's bytes (unknown to readers)
PAD_TAG = bytes([(PAD_FIELD << 3 | 2) & 0x7F | 0x80, (PAD_FIELD << 3 | 2) >> 7])  # varint
MIN_PAD = OVERHEAD + len(PAD_TAG) + 1  # the shortest padding record (no zeros)
_POLY = 0x82F63B78  # crc32c (Castagnoli), reflected
WALK_CHUNK = 1024 * 1024  # read at a time while walking a file's records
MAX_RECORD = 256 * 1024 * 1024  # a longer length is no event record: the walk stops


def _table() -> list[int]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return out


_T = _table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """crc32c of ``data`` continued from ``crc`` (short inputs: headers, tags)."""
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _square(mat: list[int]) -> list[int]:
    return [_times(mat, mat[n]) for n in range(32)]


@cache
def _zero_ops() -> list[list[int]]:
    """The operators that append 2**k zero bytes to a crc register, k = 0..63."""
    one_bit = [_POLY] + [1 << n for n in range(31)]  # one zero bit
    op = _square(_square(_square(one_bit)))  # one zero byte
    ops = [op]
    for _ in range(63):
        op = _square(op)
        ops.append(op)
    return ops


def crc32c_zeros(crc: int, n: int) -> int:
    """crc32c continued from ``crc`` over ``n`` zero bytes, in O(log n)."""
    reg = crc ^ 0xFFFFFFFF
    for k, op in enumerate(_zero_ops()):
        if n >> k & 1:
            reg = _times(op, reg)
        if n >> k == 0:
            break
    return reg ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def padding(length: int) -> tuple[bytes, bytes]:
    """One record of exactly ``length`` bytes (at least MIN_PAD) that readers skip: the bytes
    to write at its start and at its end (FOOTER bytes); the ones between are zeros."""
    if length < MIN_PAD:
        raise ValueError(f"a padding record needs {MIN_PAD} bytes, not {length}")
    data_len = length - OVERHEAD
    for width in range(1, 11):
        zeros = data_len - len(PAD_TAG) - width
        if zeros >= 0 and len(_varint(zeros)) == width:
            break
    else:  # pragma: no cover - some width always fits
        raise ValueError(length)
    head_data = PAD_TAG + _varint(zeros)
    size = struct.pack("<Q", data_len)
    head = size + struct.pack("<I", masked(crc32c(size))) + head_data
    crc = crc32c_zeros(crc32c(head_data), zeros)
    return head, struct.pack("<I", masked(crc))


def header_checks(head: bytes) -> bool:
    """``head`` (HEADER bytes) is a record header: its length's crc checks."""
    if len(head) < HEADER:
        return False
    (n,) = struct.unpack_from("<Q", head)
    (crc,) = struct.unpack_from("<I", head, 8)
    return n <= MAX_RECORD and masked(crc32c(head[:8])) == crc


def walk(fh: BinaryIO, start: int, end: int) -> Iterator[int]:
    """The offsets where the records after the one at ``start`` begin, each whole before
    ``end`` (the data's crc is not read: a record whose header checks is a record). Stops at
    a header that does not check (no TFRecord file, or bytes not written yet)."""
    pos = start
    buf, buf_at = b"", start
    while pos + HEADER <= end:
        if pos + HEADER > buf_at + len(buf):
            fh.seek(pos)
            buf, buf_at = fh.read(min(WALK_CHUNK, end - pos)), pos
            if len(buf) < HEADER:
                return
        head = buf[pos - buf_at : pos - buf_at + HEADER]
        if not header_checks(head):
            return
        (n,) = struct.unpack_from("<Q", head)
        nxt = pos + OVERHEAD + n
        if nxt > end:
            return
        pos = nxt
        yield pos


def _crc_of(body: bytes) -> int:
    """crc32c of a record's data; a padding record's zeros in O(log n)."""
    if body.startswith(PAD_TAG):
        for width in range(1, 11):
            k = len(PAD_TAG) + width
            if body[k:] == bytes(len(body) - k):
                return crc32c_zeros(crc32c(body[:k]), len(body) - k)
    return crc32c(body)


def records(data: bytes) -> Iterator[bytes]:
    """The payloads of a whole TFRecord stream in memory, crcs checked (tests, readers)."""
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        (hc,) = struct.unpack_from("<I", data, pos + 8)
        if masked(crc32c(data[pos : pos + 8])) != hc:
            raise ValueError(f"bad length crc at {pos}")
        body = data[pos + HEADER : pos + HEADER + n]
        (dc,) = struct.unpack_from("<I", data, pos + HEADER + n)
        if len(body) != n or masked(_crc_of(body)) != dc:
            raise ValueError(f"bad data crc at {pos}")
        yield body
        pos += OVERHEAD + n


def padding_at(path: str, start: int, end: int) -> bool:
    """``[start, end)`` of ``path`` is one whole padding record (as ``padding`` makes it):
    the bytes at its start and end, read back (the zeros between are not read)."""
    if start < 0 or end - start < MIN_PAD:
        return False
    head, foot = padding(end - start)
    with open(path, "rb") as fh:
        fh.seek(start)
        got_head = fh.read(len(head))
        fh.seek(end - len(foot))
        got_foot = fh.read(len(foot))
    return got_head == head and got_foot == foot
