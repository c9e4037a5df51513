"""MIG (Multi-Instance GPU): the instances of a split GPU, their memory, and what NVML cannot say.

Why: on a MIG-enabled GPU NVML reports no utilization at all (not for the parent, not per
instance) and an unprivileged user may not read the parent's memory or processes, so without
this the row would just go blank. Instances are enumerated with the static fields (they change
only when an admin repartitions), their memory is read per tick and their processes with the
GPU's process list, through their own handles (no privilege needed). The parent is then not
asked what MIG makes it refuse (utilization, memory, processes): its memory and the watched
tree's share are the instances' sums, and nothing is marked unsupported for good, so a GPU
whose MIG mode is switched off is read as usual again. ``CUDA_VISIBLE_DEVICES=MIG-<uuid>``
names an instance: core.gpu.static maps it to its parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
NOTE = (
    "MIG is on: NVML gives no utilization for MIG instances (nor for the GPU they split), so "
    "gpu-stalled and gpu-starved cannot judge them; memory and processes are shown per "
    "instance, and the GPU's memory is their sum"
)
# what a MIG-enabled parent refuses (NOT_SUPPORTED, or NO_PERMISSION without privileges): not
# asked while MIG is on, and forgotten as "unsupported" when the mode changes
PARENT_REFUSES = frozenset({"util", "samples", "mem", "procs"})


@dataclass(slots=True)
class MigInstance:
    """One MIG device handle of a parent GPU."""

    uuid: str
    handle: Any
    gpu_instance: int | None
    compute_instance: int | None
    mem_total: int | None = None
    procs: list[tuple[int, int]] | None = None  # (pid, bytes), from the latest process read
    tree_bytes: int | None = None  # held by the watched process tree
    named: bool = False  # CUDA_VISIBLE_DEVICES of the watched process names this instance


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


def mark_named(spec: str | None, instances: list[MigInstance]) -> None:
    """Which instances the watched process's ``CUDA_VISIBLE_DEVICES`` names (a MIG UUID or a
    unique prefix of one): the ones its CUDA uses."""
    tokens = [key(t) for t in (spec or "").split(",") if t.strip().lower().startswith("mig-")]
    for inst in instances:
        inst.named = any(t and key(inst.uuid).startswith(t) for t in tokens)


def read_rows(src: Any, gpu: Any) -> list[dict[str, Any]]:
    """One row per instance of ``gpu`` (a TrackedGpu): its uuid, the parent it splits (uuid,
    CUDA and NVML index), gpu/compute instance ids, memory (``None`` where refused),
    ``util_pct`` (always ``None``: NVML has none), the processes of the latest read and
    ``cuda_visible`` (the watched process's CUDA_VISIBLE_DEVICES names it)."""
    rows: list[dict[str, Any]] = []
    for inst in gpu.mig:
        row: dict[str, Any] = {
            "uuid": inst.uuid,
            "parent_uuid": gpu.uuid,
            "parent_index": gpu.index,
            "parent_nvml_index": gpu.nvml_index,
            "gpu_instance": inst.gpu_instance,
            "compute_instance": inst.compute_instance,
            "util_pct": None,
            "mem_used_bytes": None,
            "mem_total_bytes": None,
            "process_mem_bytes": inst.tree_bytes,
            "cuda_visible": inst.named,
            "processes": [{"pid": p, "used_bytes": b} for p, b in inst.procs or ()],
        }
        try:
            mem = src._call("nvmlDeviceGetMemoryInfo", inst.handle)
            row["mem_used_bytes"], row["mem_total_bytes"] = int(mem.used), int(mem.total)
            inst.mem_total = row["mem_total_bytes"]
        except src._nvml.NVMLError:
            pass
        rows.append(row)
    return rows


def parent_memory(rows: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(used, total) of a MIG parent as the sums over its instances; ``None`` unless every
    instance answered (a partial sum would understate it)."""
    used = [r["mem_used_bytes"] for r in rows]
    total = [r["mem_total_bytes"] for r in rows]
    if not rows or None in used or None in total:
        return None, None
    return sum(used), sum(total)


def read_processes(src: Any, gpu: Any, read: Any) -> list[tuple[int, int]] | None:
    """The compute processes of every instance of ``gpu`` (``read(handle, mem_total)``: the
    GpuSource's versioned process call), kept per instance for its row; ``None`` when no
    instance answered."""
    out: list[tuple[int, int]] | None = None
    for inst in gpu.mig:
        inst.procs = read(inst.handle, inst.mem_total)
        if inst.procs is not None:
            out = (out or []) + inst.procs
    return out


def attribute(gpu: Any, tree: set[int]) -> None:
    """Each instance's share held by the watched tree (``tree``: pids as NVML reports them)."""
    for inst in gpu.mig:
        inst.tree_bytes = None if inst.procs is None else sum(b for p, b in inst.procs if p in tree)
