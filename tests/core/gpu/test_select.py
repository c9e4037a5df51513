"""Issue 16 item 3: ``--gpu`` / ``c.TrainWatch.gpu`` / ``%trainwatch --gpu`` take GPU and MIG
UUIDs besides indices, and the selection matches the rows the real GpuSource reports (real
pynvml over the fake library with MIG instances)."""

from __future__ import annotations

import pytest

from tests.core.fake_nvml import Driver, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from trainwatch_lab.core.gpu.select import GpuSelection, as_selection, parse_gpu_selection
from trainwatch_lab.core.model import GpuState

__all__ = ["fake_nvml", "fake_nvml_lib"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,0", [0, 1]),  # what the index-only syntax gave before: unchanged
        ("1,1", [1]),
        ("none", []),
        ("OFF", []),
        ("MIG-4f1c", ["MIG-4f1c"]),
        ("GPU-8f3a,0", [0, "GPU-8f3a"]),
        ("MIG-GPU-8f3a-11/1/0", ["MIG-GPU-8f3a-11/1/0"]),  # pre-R470 drivers
    ],
)
def test_parse(text: str, expected: list[int | str]) -> None:
    got = parse_gpu_selection(text)
    assert isinstance(got, GpuSelection) and got == expected


@pytest.mark.parametrize("text", ["a", "0,,1", "-1", "GPU-", "8f3a", "MIG-x y"])
def test_bad_selections_say_the_syntax(text: str) -> None:
    with pytest.raises(ValueError, match="UUIDs like GPU-8f3a or MIG-4f1c"):
        parse_gpu_selection(text)


def _row(index: int, uuid: str, migs: tuple[str, ...] = ()) -> GpuState:
    return GpuState(index, index, uuid, "H100", mig=[{"uuid": m} for m in migs])


def test_rows_match_by_index_uuid_prefix_or_mig_instance() -> None:
    rows = [
        _row(0, "GPU-aaaa1111-0000"),
        _row(1, "GPU-bbbb2222-0000", ("MIG-cccc0001-0000", "MIG-cccc0002-0000")),
        _row(2, "GPU-dddd3333-0000"),
    ]
    assert parse_gpu_selection("2").indices(rows) == [2]
    assert parse_gpu_selection("gpu-AAAA").indices(rows) == [0]  # case and prefix, as CUDA
    assert parse_gpu_selection("MIG-cccc0002").indices(rows) == [1]
    assert parse_gpu_selection("MIG-GPU-dddd3333-0000/1/0").indices(rows) == [2]
    assert parse_gpu_selection("MIG-eeee").indices(rows) == []
    selection = parse_gpu_selection("0,MIG-cccc0001-0000")
    assert [r in selection for r in rows] == [True, True, False]
    assert (0 in selection, 1 in selection) == (True, False)  # a bare index: indices only


def test_as_selection_takes_what_callers_passed() -> None:
    assert as_selection(None) is None
    assert as_selection([1, 0, 1]) == [0, 1] and _row(1, "GPU-x") in as_selection([1, 0])
    same = parse_gpu_selection("MIG-1")
    assert as_selection(same) is same


def test_a_mig_uuid_from_the_fake_selects_its_parent_row(fake_nvml: FakeNvml) -> None:
    """The UUID a user copies from `nvidia-smi -L` for an instance picks its GPU's row."""
    fake_nvml.write([gpu(0), gpu(1, mig=2)])
    d = Driver(fake_nvml.env(), gpu_processes_every_s=3600, gpu_static_ttl_s=3600)
    try:
        gpus = d.tick()["sample"]["gpus"]
    finally:
        d.close()
    rows = [GpuState(g["index"], g["nvml_index"], g["uuid"], g["name"], mig=g["mig"]) for g in gpus]
    instance = gpus[1]["mig"][1]["uuid"]
    assert parse_gpu_selection(instance).indices(rows) == [1]
    assert parse_gpu_selection(gpus[0]["uuid"][:12]).indices(rows) == [0]


def test_the_source_reports_only_the_selected_gpus(fake_nvml: FakeNvml) -> None:
    """``c.TrainWatch.gpu`` / ``make_sampler(gpu=selection)``: the GpuSource itself drops the
    other rows, so the panel, /metrics and the rules of that sampler see the same GPUs."""
    fake_nvml.write([gpu(0), gpu(1, mig=2), gpu(2)])
    probe = Driver(fake_nvml.env(), gpu_processes_every_s=3600)
    try:
        uuids = [g["uuid"] for g in probe.tick()["sample"]["gpus"]]
        instance = probe.tick()["sample"]["gpus"][1]["mig"][0]["uuid"]
    finally:
        probe.close()
    for select, shown in ((f"2,{instance}", [1, 2]), (uuids[0], [0])):
        d = Driver(fake_nvml.env(), gpu_processes_every_s=3600, select=select)
        try:
            sample = d.tick()["sample"]
        finally:
            d.close()
        assert [g["index"] for g in sample["gpus"]] == shown, select
    d = Driver(fake_nvml.env(), gpu_processes_every_s=3600, select="GPU-ffff")
    try:
        sample = d.tick()["sample"]
    finally:
        d.close()
    assert sample["gpus"] == []
    here = ", ".join(f"{i} ({u})" for i, u in enumerate(uuids))
    assert sample["notes"]["gpus"] == f"none of the GPUs GPU-ffff is present (here: {here})"
    assert sample["notes"]["gpu_selection"] == "the GPU selection GPU-ffff matches no GPU here"


def test_server_config_takes_a_selection() -> None:
    """c.TrainWatch.gpu (server/config.py): True/False as before, or a selection string."""
    from traitlets import TraitError
    from traitlets.config import Config

    from trainwatch_lab.server.config import ServerSettings

    assert ServerSettings().gpu is True and ServerSettings().gpu_selection is None
    config = Config()
    config.TrainWatch.gpu = "MIG-4f1c,0"
    tw = ServerSettings(config=config)
    assert (tw.gpu, tw.gpu_selection) == ("0,MIG-4f1c", [0, "MIG-4f1c"])
    tw.gpu = "none"
    assert tw.gpu is False
    with pytest.raises(TraitError, match=r"TrainWatch\.gpu: takes GPU indices"):
        tw.gpu = "first"
