"""GpuSource against the real pynvml bindings and a scripted fake libnvidia-ml.so.1."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import time

import pytest

from tests.core.fake_nvml import GIB, Driver, FakeNvml, build, fake_nvml, fake_nvml_lib, gpu
from trainwatch_lab.core.gpu.source import decode_clock_reasons, visible_devices

__all__ = ["fake_nvml", "fake_nvml_lib"]  # fixtures used by the tests below

SLOW = {"gpu_processes_every_s": 3600, "gpu_static_ttl_s": 3600}


@pytest.fixture
def drivers() -> list[Driver]:
    started: list[Driver] = []
    yield started
    for d in started:
        if d.proc.stdin is not None and not d.proc.stdin.closed:
            d.close()
        assert "Traceback" not in d.stderr  # nothing may reach a cell as an exception


def start(drivers: list[Driver], env: dict[str, str], pid: int | None = None, **kw) -> Driver:
    d = Driver(env, pid=pid, **kw)
    drivers.append(d)
    return d


# -- pure helpers ---------------------------------------------------------------------------
UUIDS = [
    "GPU-aaaa1111-0000-0000-0000-000000000000",
    "GPU-aaaa2222-0000-0000-0000-000000000000",
    "GPU-bbbb3333-0000-0000-0000-000000000000",
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, [0, 1, 2]),
        ("", []),
        ("2,0", [2, 0]),
        (" 1 , 2 ", [1, 2]),
        ("0,7,1", [0]),  # CUDA stops at the first entry that names no device
        ("0,0", [0]),
        ("-1", []),
        ("GPU-bbbb", [2]),
        ("bbbb3333", [2]),  # UUID prefix without "GPU-"
        ("gpu-AAAA2222-0000", [1]),
        ("GPU-aaaa,2", []),  # ambiguous prefix
        ("1,MIG-aaaa1111-0000/1/0", [1]),
        ("GPU-aaaa1111-0000-0000-0000-000000000000,2", [0, 2]),
    ],
)
def test_visible_devices_follows_cuda(spec: str | None, expected: list[int]) -> None:
    assert visible_devices(spec, UUIDS) == expected


def test_decode_clock_reasons() -> None:
    assert decode_clock_reasons(0) == []
    assert decode_clock_reasons(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal"]
    assert decode_clock_reasons(0x1000) == ["bit_0x1000"]


# -- through pynvml and the fake library -----------------------------------------------------
def test_no_library_is_a_note_not_an_error(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("a real libnvidia-ml is installed here; cannot simulate its absence")
    d = start(drivers, fake_nvml.env(library=False))
    for _ in range(2):
        out = d.tick()
        assert out["sample"]["gpus"] == []
        assert "libnvidia-ml.so.1 not found" in out["sample"]["notes"]["gpus"]
    assert out["fake_calls"] is None


@pytest.mark.parametrize(
    ("init", "reason"),
    [(9, "the NVIDIA driver is not loaded"), (999, "NVML could not start: Unknown Error")],
)
def test_init_failure_is_a_note(
    fake_nvml: FakeNvml, drivers: list[Driver], init: int, reason: str
) -> None:
    fake_nvml.write([gpu(0)], init=init)
    d = start(drivers, fake_nvml.env())
    first = d.tick()
    assert first["sample"]["gpus"] == []
    assert reason in first["sample"]["notes"]["gpus"]
    second = d.tick()  # no retry before gpu_static_ttl_s: no NVML call at all
    assert second["fake_calls"] == first["fake_calls"] == 1


def test_no_devices(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    fake_nvml.write([], count=0)
    out = start(drivers, fake_nvml.env()).tick()
    assert out["sample"]["gpus"] == []
    assert out["sample"]["notes"]["gpus"] == "NVML found no NVIDIA GPU"


def test_two_gpus_all_fields_and_process_tree(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    fake_nvml.write([gpu(0), gpu(1)])
    # watch this test process: the driver is its child, so its memory counts as ours too
    d = start(drivers, fake_nvml.env(), pid=os.getpid(), gpu_processes_every_s=0)
    other = 4_000_000  # a pid that is not in our tree
    fake_nvml.write(
        [
            gpu(
                0,
                util=87,
                mem_util=31,
                mem_used=12 * GIB,
                power_mw=412_500,
                temp=71,
                pcie_tx_kbs=1500,
                pcie_rx_kbs=250_000,
                reasons=0x5,
                procs={os.getpid(): 1 * GIB, d.proc.pid: 2 * GIB, other: 5 * GIB},
            ),
            gpu(1, util=3, name="Fake A100", procs={other: GIB}),
        ]
    )
    out = d.tick()
    assert "gpus" not in out["sample"]["notes"]
    g0, g1 = out["sample"]["gpus"]
    assert (g0["index"], g0["nvml_index"], g1["index"], g1["nvml_index"]) == (0, 0, 1, 1)
    assert g0["name"] == "Fake H100 0" and g1["name"] == "Fake A100"
    assert g0["uuid"] == gpu(0)["uuid"]
    assert g0["util_pct"] == 87 and g0["mem_util_pct"] == 31
    assert g0["mem_used_bytes"] == 12 * GIB and g0["mem_total_bytes"] == 80 * GIB
    assert g0["power_w"] == pytest.approx(412.5) and g0["power_limit_w"] == pytest.approx(700)
    assert g0["temp_c"] == 71
    assert g0["pcie_tx_bps"] == 1500 * 1024 and g0["pcie_rx_bps"] == 250_000 * 1024
    assert g0["clock_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert g0["process_mem_bytes"] == 3 * GIB  # own pid + child, not the stranger
    assert g1["process_mem_bytes"] == 0
    assert g0["lost"] is False and g1["util_pct"] == 3
    assert out["process_memory"] == {
        str(os.getpid()): GIB,
        str(d.proc.pid): 2 * GIB,
        str(other): 6 * GIB,
    }


def test_cuda_visible_devices_subset_by_index_and_uuid(
    fake_nvml: FakeNvml, drivers: list[Driver]
) -> None:
    fake_nvml.write([gpu(i, util=10 * i) for i in range(4)])
    out = start(drivers, fake_nvml.env({"CUDA_VISIBLE_DEVICES": "3,1"})).tick()
    got = [(g["index"], g["nvml_index"], g["util_pct"]) for g in out["sample"]["gpus"]]
    assert got == [(0, 3, 30), (1, 1, 10)]

    prefix = gpu(2)["uuid"][:12]  # "GPU-fa4e0002"
    out = start(drivers, fake_nvml.env({"CUDA_VISIBLE_DEVICES": prefix})).tick()
    assert [(g["index"], g["nvml_index"]) for g in out["sample"]["gpus"]] == [(0, 2)]

    out = start(drivers, fake_nvml.env({"CUDA_VISIBLE_DEVICES": ""})).tick()
    assert out["sample"]["gpus"] == []
    assert "hides all 4" in out["sample"]["notes"]["gpus"]


def test_cuda_visible_devices_of_the_watched_process(
    fake_nvml: FakeNvml, drivers: list[Driver]
) -> None:
    """A server watching a kernel labels GPUs as the kernel's CUDA sees them."""
    fake_nvml.write([gpu(i) for i in range(3)])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="2")
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        out = start(drivers, fake_nvml.env(), pid=kernel.pid).tick()
    finally:
        kernel.kill()
        kernel.wait()
    assert [(g["index"], g["nvml_index"]) for g in out["sample"]["gpus"]] == [(0, 2)]


def test_not_supported_field_is_none_and_not_asked_again(
    fake_nvml: FakeNvml, drivers: list[Driver]
) -> None:
    fake_nvml.write([gpu(0, unsupported="power,temp,reasons", util=42)])
    d = start(drivers, fake_nvml.env(), **SLOW)
    ticks = [d.tick() for _ in range(3)]
    g = ticks[-1]["sample"]["gpus"][0]
    assert g["power_w"] is None and g["temp_c"] is None and g["clock_reasons"] == []
    assert g["util_pct"] == 42 and g["mem_used_bytes"] == 10 * GIB
    assert g["power_limit_w"] == pytest.approx(700)
    # after the first tick only utilization (the rates and the sample buffer, empty here),
    # memory, ECC and the event set: 5 calls per tick
    assert ticks[2]["fake_calls"] - ticks[1]["fake_calls"] == 5
    assert ticks[2]["nvml_calls"] - ticks[1]["nvml_calls"] == 5


def test_gpu_lost_mid_run(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    fake_nvml.write([gpu(0, util=80), gpu(1, util=90)])
    d = start(drivers, fake_nvml.env(), **SLOW)
    before = d.tick()
    assert [g["lost"] for g in before["sample"]["gpus"]] == [False, False]
    fake_nvml.write([gpu(0, util=81), gpu(1, util=90, lost=1)])
    during = d.tick()
    g0, g1 = during["sample"]["gpus"]
    assert g0["util_pct"] == 81 and not g0["lost"]
    assert g1["lost"] is True and g1["util_pct"] is None and g1["uuid"] == gpu(1)["uuid"]
    after = d.tick()
    assert after["sample"]["gpus"][1]["lost"] is True
    # the lost GPU is never asked again: 7 calls per tick for GPU 0 only, and the event set
    assert after["fake_calls"] - during["fake_calls"] == 7 + 1
    assert after["nvml_calls"] - during["nvml_calls"] == 7 + 1


def test_counter_matches_the_library_and_calls_per_tick(
    fake_nvml: FakeNvml, drivers: list[Driver]
) -> None:
    fake_nvml.write([gpu(0), gpu(1)])
    d = start(drivers, fake_nvml.env(), **SLOW)
    first, second = d.tick(), d.tick()
    assert first["nvml_calls"] == first["fake_calls"]
    # util (rates, an empty sample buffer), mem, power, temp, reasons, ECC per GPU; one
    # non-blocking wait on the event set
    assert second["fake_calls"] - first["fake_calls"] == 2 * 7 + 1
    assert second["nvml_calls"] - first["nvml_calls"] == 2 * 7 + 1
    closed = d.close()
    assert closed["fake_calls"] == closed["nvml_calls"]  # nvmlShutdown counted too


def test_processes_read_at_most_every_interval(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    fake_nvml.write([gpu(0, procs={os.getpid(): GIB})])
    d = start(drivers, fake_nvml.env(), pid=os.getpid(), gpu_processes_every_s=3600)
    first = d.tick()
    assert first["sample"]["gpus"][0]["process_mem_bytes"] == GIB
    fake_nvml.write([gpu(0, procs={os.getpid(): 2 * GIB})])
    time.sleep(0.05)
    second = d.tick()  # not re-read yet: the cached value is carried
    assert second["sample"]["gpus"][0]["process_mem_bytes"] == GIB


def test_no_gpu_machine_through_sampler_and_advice() -> None:
    """In this very process (no fake): the GPU part becomes a note and an info, nothing else."""
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("a real libnvidia-ml is installed here")
    from trainwatch_lab.advice.advisor import Advisor
    from trainwatch_lab.advice.gpu.detectors import GPU_DETECTORS
    from trainwatch_lab.core.gpu.source import GpuSource
    from trainwatch_lab.core.sampler import Sampler

    source = GpuSource()
    sampler = Sampler([source], evaluate=Advisor(GPU_DETECTORS))
    try:
        sample = sampler.tick()
        assert sample.gpus == []
        assert "gpus" in sample.notes and "Error" not in sample.notes["gpus"]
        assert [(w.code, w.severity) for w in sample.warnings] == [("gpu-unavailable", "info")]
        assert sampler.tick().warnings[0].code == "gpu-unavailable"
        assert source.nvml_calls == 1  # one failed init, no retry before the TTL
    finally:
        sampler.close()


def test_old_driver_without_clock_event_reasons(
    fake_nvml: FakeNvml, drivers: list[Driver], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Drivers before 535 only export the "Throttle" name and no nvmlDeviceGetTemperatureV:
    fall back to the old names, once."""
    old = build(tmp_path_factory.mktemp("old_nvml"), "FAKE_NVML_OLD_DRIVER")
    fake = FakeNvml(old, fake_nvml.script)
    fake.write([gpu(0, reasons=0x8, temp=61)])
    d = start(drivers, fake.env(), **SLOW)
    first, second, third = d.tick(), d.tick(), d.tick()
    assert first["sample"]["gpus"][0]["clock_reasons"] == ["hw_slowdown"]
    assert third["sample"]["gpus"][0]["clock_reasons"] == ["hw_slowdown"]
    assert first["sample"]["gpus"][0]["temp_c"] == third["sample"]["gpus"][0]["temp_c"] == 61
    assert third["fake_calls"] - second["fake_calls"] == 7 + 1  # no failed lookup per tick
    assert third["nvml_calls"] == third["fake_calls"]  # a missing symbol is no call
