"""MIG (Multi-Instance GPU): the instances of a split GPU, their memory, and what NVML cannot say.

Why: on a MIG-enabled GPU NVML reports no utilization at all (not for the parent, not per
instance) and an unprivileged user may not read the parent's memory or processes, so without
this the row would just go blank. Instances are enumerated with the static fields (they change
only when an admin repartitions) and their memory is read per tick through their own handles.
``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` names an instance: core.gpu_static maps it to its parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
NOTE = (
    "MIG is on: NVML gives no utilization for MIG instances (nor for the GPU they split), so "
    "gpu-stalled and gpu-starved cannot judge them; memory is shown per instance"
)


@dataclass(slots=True)
class MigInstance:
    """One MIG device handle of a parent GPU."""

    uuid: str
    handle: Any
    gpu_instance: int | None
    compute_instance: int | None


def key(uuid: str) -> str:
    """A MIG UUID as CUDA_VISIBLE_DEVICES and --gpu compare it: lower case, no ``MIG-``."""
    text = uuid.strip().lower()
    return text[4:] if text.startswith("mig-") else text


def enumerate_instances(src: Any, gpu: Any) -> tuple[bool | None, list[MigInstance]]:
    """(MIG on?, its instances). ``None`` when the driver cannot say (no MIG support)."""
    mode = src._query(gpu, "mig_mode", "nvmlDeviceGetMigMode")
    if mode is None:
        return None, []
    if int(mode[0]) != ENABLED:
        return False, []
    count = src._query(gpu, "mig_count", "nvmlDeviceGetMaxMigDeviceCount") or 0
    out: list[MigInstance] = []
    for i in range(int(count)):
        try:
            handle = src._call("nvmlDeviceGetMigDeviceHandleByIndex", gpu.handle, i)
            uuid = src._call("nvmlDeviceGetUUID", handle)
        except src._nvml.NVMLError:  # NOT_FOUND: an empty slot
            continue
        out.append(MigInstance(uuid, handle, _id(src, handle, "Gpu"), _id(src, handle, "Compute")))
    return True, out


def _id(src: Any, handle: Any, kind: str) -> int | None:
    try:
        return int(src._call(f"nvmlDeviceGet{kind}InstanceId", handle))
    except src._nvml.NVMLError:
        return None


def read_memory(src: Any, instances: list[MigInstance]) -> list[dict[str, Any]]:
    """Per instance: uuid, gpu/compute instance ids and memory (``None`` where refused)."""
    rows: list[dict[str, Any]] = []
    for inst in instances:
        row: dict[str, Any] = {
            "uuid": inst.uuid,
            "gpu_instance": inst.gpu_instance,
            "compute_instance": inst.compute_instance,
            "mem_used_bytes": None,
            "mem_total_bytes": None,
        }
        try:
            mem = src._call("nvmlDeviceGetMemoryInfo", inst.handle)
            row["mem_used_bytes"], row["mem_total_bytes"] = int(mem.used), int(mem.total)
        except src._nvml.NVMLError:
            pass
        rows.append(row)
    return rows
