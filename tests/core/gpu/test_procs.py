"""Process lists as real drivers answer them (issue 16, item 2), through the real pynvml over
the fake library: a driver without ``_v3`` (pynvml 13 raises NVMLLibraryMismatchError for
the plain name), and bogus entries (pid 0, 0xFFFFFFFF, more memory than the GPU has)."""

from __future__ import annotations

import os

import pytest

from tests.core.fake_nvml import GIB, Driver, FakeNvml, build, fake_nvml, fake_nvml_lib, gpu

__all__ = ["fake_nvml", "fake_nvml_lib"]

FAST = {"gpu_processes_every_s": 0.0}


@pytest.fixture
def drivers() -> list[Driver]:
    started: list[Driver] = []
    yield started
    for d in started:
        d.close()


def test_a_driver_without_v3_still_lists_processes(
    fake_nvml: FakeNvml, drivers: list[Driver], tmp_path_factory: pytest.TempPathFactory
) -> None:
    lib = build(tmp_path_factory.mktemp("no_v3"), "FAKE_NVML_NO_V3")
    fake = FakeNvml(lib, fake_nvml.script)
    me = os.getpid()
    fake.write([gpu(0, procs={me: 3 * GIB, 99999: GIB})])
    d = Driver(fake.env(), pid=me, **FAST)
    drivers.append(d)
    first, second = d.tick(), d.tick()
    for tick in (first, second):
        assert tick["sample"]["gpus"][0]["process_mem_bytes"] == 3 * GIB, tick
        assert tick["process_memory"] == {str(me): 3 * GIB, "99999": GIB}
    assert second["fake_calls"] - first["fake_calls"] == second["nvml_calls"] - first["nvml_calls"]


def test_bogus_entries_are_dropped(fake_nvml: FakeNvml, drivers: list[Driver]) -> None:
    me = os.getpid()
    procs = {0: GIB, 0xFFFFFFFF: GIB, 4321: 500 * GIB, me: 2 * GIB}
    fake_nvml.write([gpu(0, procs=procs)])
    d = Driver(fake_nvml.env(), pid=me, **FAST)
    drivers.append(d)
    d.tick()  # the first tick learns the GPU's total memory
    tick = d.tick()
    assert tick["process_memory"] == {str(me): 2 * GIB}
    assert tick["sample"]["gpus"][0]["process_mem_bytes"] == 2 * GIB
