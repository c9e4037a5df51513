"""GPU health through the real pynvml and the fake library: XID events, volatile ECC errors."""

from __future__ import annotations

from tests.core.fake_nvml import Driver, FakeNvml, fake_nvml, fake_nvml_lib, gpu

__all__ = ["fake_nvml", "fake_nvml_lib"]

SLOW = {"gpu_processes_every_s": 3600, "gpu_static_ttl_s": 3600}


def test_xid_events_arrive_once_on_their_gpu(fake_nvml: FakeNvml) -> None:
    fake_nvml.write([gpu(0), gpu(1)])
    d = Driver(fake_nvml.env(), **SLOW)
    try:
        first = d.tick()  # registers both GPUs: nothing pending yet
        assert [g["xid_errors"] for g in first["sample"]["gpus"]] == [[], []]
        fake_nvml.write([gpu(0), gpu(1, xids="79,48")])
        second = d.tick()
        assert [g["xid_errors"] for g in second["sample"]["gpus"]] == [[], [79, 48]]
        third = d.tick()  # each event is handed out once
        assert [g["xid_errors"] for g in third["sample"]["gpus"]] == [[], []]
        assert third["nvml_calls"] == third["fake_calls"]  # the counter stays honest
    finally:
        d.close()
    assert "Traceback" not in d.stderr


def test_ecc_count_and_boards_without_ecc_or_events(fake_nvml: FakeNvml) -> None:
    fake_nvml.write([gpu(0, ecc_uncorrected=3), gpu(1, unsupported="ecc,events", xids="13")])
    d = Driver(fake_nvml.env(), **SLOW)
    try:
        ticks = [d.tick() for _ in range(3)]
    finally:
        closed = d.close()
    g0, g1 = ticks[-1]["sample"]["gpus"]
    assert g0["ecc_uncorrected"] == 3 and g1["ecc_uncorrected"] is None
    assert all(t["sample"]["gpus"][1]["xid_errors"] == [] for t in ticks)
    # per tick: util (rates and an empty sample buffer), mem, power, temp, reasons, ECC on gpu0
    # (not asked again on gpu1), and one non-blocking wait on the event set
    assert ticks[2]["fake_calls"] - ticks[1]["fake_calls"] == 6 + 1 + 6 + 1
    assert closed["fake_calls"] == closed["nvml_calls"]  # the event set is freed, counted
    assert "Traceback" not in d.stderr
