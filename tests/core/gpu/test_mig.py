"""Issue 16 item 3: MIG through the real pynvml and the fake library (MIG device handles, a
parent that answers no utilization and refuses memory), and CUDA_VISIBLE_DEVICES=MIG-..."""

from __future__ import annotations

import pytest

from tests.core.fake_nvml import GIB, Driver, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from trainwatch_lab.core.gpu.source import visible_devices

__all__ = ["fake_nvml", "fake_nvml_lib"]

SLOW = {"gpu_processes_every_s": 3600, "gpu_static_ttl_s": 3600}
UUIDS = ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000"]
MIGS = {"MIG-cccc0001-0000": 1, "MIG-cccc0002-0000": 1, "MIG-dddd0001-0000": 0}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("MIG-cccc0001-0000", [1]),  # an instance stands for its parent
        ("MIG-dddd", [0]),  # a unique prefix, as for GPU UUIDs
        ("MIG-cccc", []),  # ambiguous: CUDA stops
        ("MIG-eeee", []),  # unknown
        ("MIG-GPU-bbbb2222-0000/1/0", [1]),  # the pre-R470 form names the parent itself
        ("0,MIG-cccc0002-0000", [0, 1]),
    ],
)
def test_mig_tokens_map_to_their_parent(spec: str, expected: list[int]) -> None:
    assert visible_devices(spec, UUIDS, MIGS) == expected


def test_mig_gpu_shows_instances_and_says_why_no_utilization(fake_nvml: FakeNvml) -> None:
    fake_nvml.write([gpu(0), gpu(1, mig=2, mig_used=f"{GIB},{3 * GIB}")])
    d = Driver(fake_nvml.env(), **SLOW)
    try:
        ticks = [d.tick() for _ in range(2)]
    finally:
        closed = d.close()
    assert "Traceback" not in d.stderr
    g0, g1 = ticks[-1]["sample"]["gpus"]
    assert g0["mig_mode"] is False and g0["mig"] == [] and g0["util_pct"] == 50
    assert g1["mig_mode"] is True and g1["util_pct"] is None
    assert [m["mem_used_bytes"] for m in g1["mig"]] == [GIB, 3 * GIB]
    assert [m["mem_total_bytes"] for m in g1["mig"]] == [40 * GIB, 40 * GIB]
    assert [m["gpu_instance"] for m in g1["mig"]] == [1, 2]
    assert all(m["uuid"].startswith("MIG-") for m in g1["mig"])
    assert "no utilization for MIG instances" in ticks[-1]["sample"]["notes"]["gpu_mig"]
    assert ticks[-1]["nvml_calls"] == ticks[-1]["fake_calls"]
    assert closed["nvml_calls"] == closed["fake_calls"]


def test_cuda_visible_devices_naming_a_mig_instance_is_not_all_hidden(
    fake_nvml: FakeNvml,
) -> None:
    fake_nvml.write([gpu(0), gpu(1, mig=2)])
    probe = Driver(fake_nvml.env(), **SLOW)
    try:
        mig_uuid = probe.tick()["sample"]["gpus"][1]["mig"][1]["uuid"]
    finally:
        probe.close()
    d = Driver(fake_nvml.env({"CUDA_VISIBLE_DEVICES": mig_uuid}), **SLOW)
    try:
        out = d.tick()
    finally:
        d.close()
    assert "gpus" not in out["sample"]["notes"], out["sample"]["notes"]
    assert [(g["index"], g["nvml_index"]) for g in out["sample"]["gpus"]] == [(0, 1)]
    rows = out["sample"]["gpus"][0]["mig"]
    assert [(r["uuid"], r["cuda_visible"]) for r in rows] == [
        (rows[0]["uuid"], False),
        (mig_uuid, True),
    ]


def test_processes_and_memory_per_instance_through_their_own_handles(
    fake_nvml: FakeNvml,
) -> None:
    """The parent refuses processes and memory (no privilege): each instance row lists its
    processes and what the watched tree holds there; the parent's figures are the sums."""
    me, other = 4242, 5151
    mig = {0: {me: GIB, other: 2 * GIB}, 1: {me: 512 * 1024**2}}
    fake_nvml.write([gpu(0, mig=2, mig_used=f"{3 * GIB},{GIB}", mig_procs=mig)])
    d = Driver(fake_nvml.env(), pid=me, gpu_processes_every_s=0, gpu_static_ttl_s=3600)
    try:
        out = [d.tick() for _ in range(2)][-1]
    finally:
        d.close()
    assert "Traceback" not in d.stderr
    g = out["sample"]["gpus"][0]
    rows = g["mig"]
    assert [(r["parent_uuid"], r["parent_index"]) for r in rows] == [(g["uuid"], 0)] * 2
    assert [r["processes"] for r in rows] == [
        [{"pid": me, "used_bytes": GIB}, {"pid": other, "used_bytes": 2 * GIB}],
        [{"pid": me, "used_bytes": 512 * 1024**2}],
    ]
    assert [r["process_mem_bytes"] for r in rows] == [GIB, 512 * 1024**2]
    assert [r["util_pct"] for r in rows] == [None, None]
    assert g["process_mem_bytes"] == GIB + 512 * 1024**2
    assert (g["mem_used_bytes"], g["mem_total_bytes"]) == (4 * GIB, 80 * GIB)
    assert out["process_memory"] == {str(me): GIB + 512 * 1024**2, str(other): 2 * GIB}
    assert out["nvml_calls"] == out["fake_calls"]


def test_mig_switched_off_reads_the_gpu_as_usual_again(fake_nvml: FakeNvml) -> None:
    """Nothing was marked unsupported for good while MIG was on."""
    fake_nvml.write([gpu(0, mig=2)])
    d = Driver(fake_nvml.env(), gpu_processes_every_s=0, gpu_static_ttl_s=0)
    try:
        on = d.tick()["sample"]
        fake_nvml.write([gpu(0, procs={77: GIB})])
        off = [d.tick() for _ in range(2)][-1]["sample"]
    finally:
        d.close()
    assert on["gpus"][0]["util_pct"] is None and on["gpus"][0]["mig_mode"] is True
    g = off["gpus"][0]
    assert (g["mig_mode"], g["mig"], g["util_pct"]) == (False, [], 50)
    assert g["mem_used_bytes"] == 10 * GIB
    assert "gpu_mig" not in off["notes"]
