"""Which physical GPU each row is (issue 16, item 4): UUIDs, PCI bus ids, NO_PERMISSION gaps."""

from __future__ import annotations

from tests.core.fake_nvml import Driver, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from trainwatch_lab.core.gpu.numbering import ASSUMED, BY_PCI_ORDER, BY_UUID, index_basis

__all__ = ["fake_nvml", "fake_nvml_lib"]


def test_index_basis() -> None:
    same, mixed = ["H100", "H100"], ["H100", "A100"]
    assert index_basis(None, None, same) == [BY_PCI_ORDER, BY_PCI_ORDER]
    assert index_basis(None, None, mixed) == [ASSUMED, ASSUMED]
    assert index_basis("1,0", "PCI_BUS_ID", mixed) == [BY_PCI_ORDER, BY_PCI_ORDER]
    assert index_basis("GPU-fa4e0001,0", None, mixed) == [BY_UUID, ASSUMED]


def tick(fake: FakeNvml, env: dict[str, str] | None = None) -> dict:
    d = Driver(fake.env(env))
    try:
        return d.tick()["sample"]
    finally:
        d.close()
        assert "Traceback" not in d.stderr


def test_rows_carry_bus_id_and_basis(fake_nvml: FakeNvml) -> None:
    fake_nvml.write([gpu(0), gpu(1, name="Fake A100", bus_id="00000000:41:00.0")])
    rows = tick(fake_nvml)["gpus"]
    assert [(g["index"], g["nvml_index"], g["pci_bus_id"]) for g in rows] == [
        (0, 0, "00000000:18:00.0"),
        (1, 1, "00000000:41:00.0"),
    ]
    assert [g["index_basis"] for g in rows] == [ASSUMED, ASSUMED]  # mixed models, fastest first
    rows = tick(fake_nvml, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})["gpus"]
    assert [g["index_basis"] for g in rows] == [BY_PCI_ORDER, BY_PCI_ORDER]
    rows = tick(fake_nvml, {"CUDA_VISIBLE_DEVICES": gpu(1)["uuid"]})["gpus"]
    assert [(g["index"], g["nvml_index"], g["index_basis"]) for g in rows] == [(0, 1, BY_UUID)]


def test_a_no_permission_device_shifts_no_other_row(fake_nvml: FakeNvml) -> None:
    """A device whose handle is refused (another container's) is skipped, not renumbered."""
    fake_nvml.write([gpu(0), gpu(1, no_permission=1), gpu(2)])
    rows = tick(fake_nvml)["gpus"]
    assert [(g["index"], g["nvml_index"], g["uuid"]) for g in rows] == [
        (0, 0, gpu(0)["uuid"]),
        (2, 2, gpu(2)["uuid"]),
    ]
    rows = tick(fake_nvml, {"CUDA_VISIBLE_DEVICES": f"{gpu(2)['uuid']},0"})["gpus"]
    assert [(g["index"], g["nvml_index"]) for g in rows] == [(0, 2), (1, 0)]
