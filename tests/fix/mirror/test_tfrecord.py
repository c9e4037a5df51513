"""TFRecord framing (fix.mirror.tfrecord): the crc against tensorboardX's own, padding
records that a reader parses and skips, the walk over a real event file."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest

from trainwatch_lab.fix.mirror import tfrecord


def test_crc32c_matches_tensorboardx_and_zeros_are_continued_in_log_time() -> None:
    crc = pytest.importorskip("tensorboardX.crc32c")
    for data in (b"", b"abc", os.urandom(4097)):
        assert tfrecord.crc32c(data) == crc.crc32c(data)
    for n in (0, 1, 7, 4096, 100_003):
        assert tfrecord.crc32c_zeros(tfrecord.crc32c(b"xy"), n) == crc.crc32c(b"xy" + bytes(n))


@pytest.mark.parametrize("length", [tfrecord.MIN_PAD, 20, 143, 144, 16_400, 3_000_000])
def test_a_padding_record_has_the_length_asked_and_parses_as_an_empty_event(
    length: int,
) -> None:
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    head, foot = tfrecord.padding(length)
    record = head + bytes(length - len(head) - len(foot)) + foot
    assert len(record) == length
    (body,) = tfrecord.records(record)  # both crcs check
    event = event_pb2.Event()
    event.ParseFromString(body)
    assert event.ListFields() == []  # nothing a reader shows: skipped
    with pytest.raises(ValueError):
        tfrecord.padding(tfrecord.MIN_PAD - 1)


def test_the_walk_finds_every_record_start_of_a_real_event_file(tmp_path: Path) -> None:
    tbx = pytest.importorskip("tensorboardX")
    with tbx.SummaryWriter(str(tmp_path)) as writer:
        for i in range(200):
            writer.add_scalar("loss", 1.0 / (i + 1), i)
    (path,) = tmp_path.glob("*tfevents*")
    data = path.read_bytes()
    bodies = list(tfrecord.records(data))
    with open(path, "rb") as fh:
        starts = list(tfrecord.walk(fh, 0, len(data)))
    assert len(starts) == len(bodies) and starts[-1] == len(data)
    with open(path, "rb") as fh:  # an unfinished last record is not counted
        assert list(tfrecord.walk(fh, 0, len(data) - 1)) == starts[:-1]
    assert not list(tfrecord.walk(io.BytesIO(b"not a tfrecord stream"), 0, 21))
    assert not tfrecord.header_checks(struct.pack("<QI", 5, 0))


def test_padding_at_tells_a_whole_padding_record_from_records_and_zeros(tmp_path: Path) -> None:
    """What a restarted mirror and each round check before trusting a released prefix."""
    head, foot = tfrecord.padding(5000)
    path = tmp_path / "f"
    records = b"".join(struct.pack("<Q", 10) + b"h" * 4 + b"x" * 10 + b"f" * 4 for _ in range(300))
    path.write_bytes(b"a" * 100 + head + bytes(5000 - len(head) - len(foot)) + foot + records)
    assert tfrecord.padding_at(str(path), 100, 5100)
    assert not tfrecord.padding_at(str(path), 100, 5200)  # not where this one ends
    assert not tfrecord.padding_at(str(path), 5100, 5100 + 5000)  # records there
    assert not tfrecord.padding_at(str(path), 0, 5)  # too short for any padding record
    path.write_bytes(bytes(10_000))  # a half-made pad: zeros, no header yet
    assert not tfrecord.padding_at(str(path), 100, 5100)
