"""The slow half of the GPU source: which GPUs the watched process sees, and what never changes.

Why a module of its own: enumeration, ``CUDA_VISIBLE_DEVICES`` and the static fields (name,
power limit, PCI bus id) run once per ``gpu_static_ttl_s``, apart from the per-tick reads in
core.gpu.source; keeping them here keeps each module readable. ``refresh`` works on a
:class:`~trainwatch_lab.core.gpu.source.GpuSource` through its ``_call``/``_query`` helpers, so the
NVML
call counter stays honest.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import hostfs
from . import mig as gpu_mig
from . import numbering as gpu_numbering

_GPU_IS_LOST = 15  # nvml.h


@dataclass(slots=True)
class TrackedGpu:
    """What we keep per visible GPU between ticks."""

    index: int
    nvml_index: int
    handle: Any
    uuid: str
    name: str = "?"
    power_limit_w: float | None = None
    lost: bool = False
    unsupported: set[str] = field(default_factory=set)
    pcie: tuple[float | None, float | None] = (None, None)
    pcie_at: float = -math.inf
    process_mem_bytes: int | None = None
    procs_version: int = 0  # index in gpu_procs.VERSIONS of the call that answered last
    mem_total: int | None = None
    xids: list[int] = field(default_factory=list)  # XID events drained this tick
    pci_bus_id: str | None = None
    index_basis: str = gpu_numbering.BY_PCI_ORDER
    minor: int | None = None  # /dev/nvidia<minor>, read once when NVML's PIDs are not ours
    samples_at_us: int | None = None  # newest utilization sample seen (core.gpu.utilization)
    mig_mode: bool | None = None
    mig: list[gpu_mig.MigInstance] = field(default_factory=list)


def _uuid_key(text: str) -> str:
    text = text.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def visible_devices(
    spec: str | None, uuids: Sequence[str], mig: Mapping[str, int] | None = None
) -> list[int]:
    """Physical (NVML) indices in the order CUDA numbers them under ``CUDA_VISIBLE_DEVICES``.

    Follows CUDA's parsing: unset means all devices; entries are indices or (unique prefixes
    of) UUIDs with or without the ``GPU-`` prefix; parsing stops at the first entry that names
    no device (a bad index, an unknown or ambiguous UUID, a repeat). A MIG instance
    (``MIG-<uuid>`` with ``mig``: MIG UUID -> parent index, or the old
    ``MIG-GPU-<uuid>/gi/ci``) stands for its parent GPU.
    """
    if spec is None:
        return list(range(len(uuids)))
    keys = [_uuid_key(u) for u in uuids]
    out: list[int] = []
    for raw in spec.split(","):
        token = raw.strip()
        if not token:
            break
        if token.lstrip("+-").isdigit():
            idx = int(token)
            if not 0 <= idx < len(uuids):
                break
        elif token.lower().startswith("mig-"):
            found = _mig_parent(token, keys, mig or {})
            if found is None:
                break
            idx = found
        else:
            want = _uuid_key(token)
            matches = [i for i, k in enumerate(keys) if want and k.startswith(want)]
            if len(matches) != 1:
                break
            idx = matches[0]
        if idx in out:
            break
        out.append(idx)
    return out


def _mig_parent(token: str, keys: Sequence[str], mig: Mapping[str, int]) -> int | None:
    """The parent index of a MIG token, ``None`` when unknown or ambiguous."""
    want = gpu_mig.key(token)
    if want.startswith("gpu-"):  # MIG-GPU-<parent uuid>/<gi>/<ci> (drivers before R470)
        parent = _uuid_key(want.split("/", 1)[0])
        matches = [i for i, k in enumerate(keys) if k == parent]
    else:
        matches = [i for k, i in mig.items() if want and gpu_mig.key(k).startswith(want)]
    return matches[0] if len(matches) == 1 else None


def cuda_visible_devices(pid: int, name: str = "CUDA_VISIBLE_DEVICES") -> str | None:
    """CUDA_VISIBLE_DEVICES (or another ``name``) as the watched process sees it (its own
    environment when we may read it, ours otherwise: a server and its kernels share it)."""
    if pid != os.getpid():
        try:
            with open(f"{hostfs.procfs()}/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            pass
        else:
            for item in env:
                if item.startswith(name.encode() + b"="):
                    return item.split(b"=", 1)[1].decode(errors="replace")
            return None
    return os.environ.get(name)


def refresh(src: Any, now: float) -> None:
    """Enumerate devices, apply CUDA_VISIBLE_DEVICES, read names and power limits (``src``:
    the GpuSource whose ``_gpus`` and ``_reason`` this sets)."""
    nvml = src._nvml
    src._static_at = now
    try:
        count = src._call("nvmlDeviceGetCount")
    except nvml.NVMLError as exc:
        src._gpus = []
        src._reason = f"NVML could not count GPUs: {exc}"
        return
    if count == 0:
        src._gpus = []
        src._reason = "NVML found no NVIDIA GPU"
        return
    previous = {g.nvml_index: g for g in src._gpus}
    handles, uuids = _enumerate(src, count, previous)
    migs = _mig_owners(src, handles, uuids, previous)
    spec = cuda_visible_devices(src.pid)
    gpus: list[TrackedGpu] = []
    for cuda_index, i in enumerate(visible_devices(spec, uuids, migs)):
        old = previous.get(i)
        if old is not None and old.uuid == uuids[i]:
            old.index = cuda_index
            if handles[i] is not None:
                old.handle = handles[i]
            gpu = old
        elif handles[i] is None:
            continue  # lost before we ever saw it
        else:
            gpu = TrackedGpu(index=cuda_index, nvml_index=i, handle=handles[i], uuid=uuids[i])
        if not gpu.lost:
            _read_static(src, gpu)
        gpu_mig.mark_named(spec, gpu.mig)
        gpus.append(gpu)
    bases = gpu_numbering.index_basis(
        spec, cuda_visible_devices(src.pid, "CUDA_DEVICE_ORDER"), [g.name for g in gpus]
    )
    for gpu, basis in zip(gpus, bases, strict=True):
        gpu.index_basis = basis
    src._gpus = gpus
    if not gpus:
        src._reason = f"CUDA_VISIBLE_DEVICES={spec!r} hides all {count} NVIDIA GPUs"


def _enumerate(
    src: Any, count: int, previous: dict[int, TrackedGpu]
) -> tuple[list[Any], list[str]]:
    """Handles and UUIDs by NVML index; a lost GPU is never asked again (handle ``None``)."""
    handles: list[Any] = []
    uuids: list[str] = []
    for i in range(count):
        old = previous.get(i)
        if old is not None and old.lost:
            handles.append(None)
            uuids.append(old.uuid)
            continue
        try:
            handle = src._call("nvmlDeviceGetHandleByIndex", i)
            uuid = src._call("nvmlDeviceGetUUID", handle)
        except src._nvml.NVMLError as exc:
            handle, uuid = None, old.uuid if old else f"nvml-{i}"
            if getattr(exc, "value", None) == _GPU_IS_LOST and old is not None:
                old.lost = True
        handles.append(handle)
        uuids.append(uuid)
    return handles, uuids


def _mig_owners(
    src: Any, handles: list[Any], uuids: list[str], previous: dict[int, TrackedGpu]
) -> dict[str, int]:
    """MIG UUID -> parent NVML index over every GPU (CUDA_VISIBLE_DEVICES may name any)."""
    owners: dict[str, int] = {}
    for i, handle in enumerate(handles):
        if handle is None:
            continue
        old = previous.get(i)
        probe = old if old is not None and old.uuid == uuids[i] else None
        probe = probe or TrackedGpu(index=-1, nvml_index=i, handle=handle, uuid=uuids[i])
        probe.handle = handle
        before = probe.mig_mode
        probe.mig_mode, probe.mig = gpu_mig.enumerate_instances(src, probe)
        if before is not None and before != probe.mig_mode:  # repartitioned: ask afresh
            probe.unsupported -= gpu_mig.PARENT_REFUSES
        previous[i] = probe
        owners.update((inst.uuid, i) for inst in probe.mig)
    return owners


def _read_static(src: Any, gpu: TrackedGpu) -> None:
    """Name, enforced power limit and (once) the PCI bus id."""
    name = src._query(gpu, "name", "nvmlDeviceGetName")
    if name is not None:
        gpu.name = name
    limit = src._query(gpu, "power_limit", "nvmlDeviceGetEnforcedPowerLimit")
    gpu.power_limit_w = limit / 1000.0 if limit is not None else None
    if gpu.pci_bus_id is None:
        info = src._query(gpu, "pci_info", "nvmlDeviceGetPciInfo_v3")
        gpu.pci_bus_id = gpu_numbering.bus_id(info) if info is not None else None
