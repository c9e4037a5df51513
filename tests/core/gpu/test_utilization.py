"""Issue 16 item 5 through the real pynvml and the fake library: utilization averaged over the
tick from NVML's sample buffer, the deprecated calls' successors, transient driver errors and
the ~20 ms PCIe read."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.core.fake_nvml import Driver, FakeNvml, build, fake_nvml, fake_nvml_lib, gpu

__all__ = ["fake_nvml", "fake_nvml_lib"]

SLOW = {"gpu_processes_every_s": 3600, "gpu_static_ttl_s": 3600}


@pytest.fixture
def drivers() -> Iterator[list[Driver]]:
    started: list[Driver] = []
    yield started
    for d in started:
        if d.proc.stdin is not None and not d.proc.stdin.closed:
            d.close()
        assert "Traceback" not in d.stderr


def test_duty_cycled_kernel_reads_its_share_of_the_tick(
    fake_nvml: FakeNvml, drivers: list[Driver]
) -> None:
    """200 ms busy of every second: the tick's mean is ~20 %, where one UtilizationRates
    reading (the last 100 ms here) says 0 or 100."""
    fake_nvml.write([gpu(0, duty="200/800", sample_ms=100)])
    d = Driver(fake_nvml.env(), **SLOW)
    drivers.append(d)
    d.tick()
    utils = []
    for _ in range(3):
        time.sleep(1.0)
        utils.append(d.tick()["sample"]["gpus"][0]["util_pct"])
    assert all(10 <= u <= 30 for u in utils), utils
    last = d.tick()  # nothing new in the buffer yet: the rates reading, honestly counted
    assert last["sample"]["gpus"][0]["util_pct"] in (0.0, 100.0)
    assert last["nvml_calls"] == last["fake_calls"]


def test_nvml13_without_deprecated_calls(
    fake_nvml: FakeNvml, drivers: list[Driver], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No nvmlDeviceGetTemperature, no "Throttle" reasons call: the successors answer."""
    lib = build(tmp_path_factory.mktemp("nvml13"), "FAKE_NVML_NO_DEPRECATED")
    fake = FakeNvml(lib, fake_nvml.script)
    fake.write([gpu(0, temp=66, reasons=0x40)])
    d = Driver(fake.env(), **SLOW)
    drivers.append(d)
    ticks = [d.tick() for _ in range(2)]
    g = ticks[-1]["sample"]["gpus"][0]
    assert g["temp_c"] == 66 and g["clock_reasons"] == ["hw_thermal"]
    assert ticks[-1]["nvml_calls"] == ticks[-1]["fake_calls"]


@pytest.mark.parametrize("code", [999, 10])  # NVML_ERROR_UNKNOWN, NVML_ERROR_TIMEOUT
def test_transient_errors_leave_a_gap_not_a_dead_field(
    fake_nvml: FakeNvml, drivers: list[Driver], code: int
) -> None:
    fake_nvml.write([gpu(0, util=70, temp=50, fail=f"temp:2:{code}")])
    d = Driver(fake_nvml.env(), **SLOW)
    drivers.append(d)
    temps = [d.tick()["sample"]["gpus"][0]["temp_c"] for _ in range(4)]
    assert temps == [None, None, 50, 50]
    fake_nvml.write([gpu(0, util=70, temp=50, fail=f"util:1:{code}")])
    utils = [d.tick()["sample"]["gpus"][0]["util_pct"] for _ in range(2)]
    assert utils == [None, 70]


def test_pcie_reads_block_like_the_driver(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    """Each PCIe read costs ~20 ms in the fake as on real drivers: the first tick pays two,
    later ticks none until ``gpu_pcie_every_s`` has passed."""
    fake_nvml.write([gpu(0)])
    d = Driver(fake_nvml.env(), **SLOW)
    drivers.append(d)
    first, second = d.tick(), d.tick()
    assert first["cost_s"] >= 0.04
    assert second["cost_s"] < first["cost_s"] - 0.03
    assert second["sample"]["gpus"][0]["pcie_rx_bps"] == 2000 * 1024
