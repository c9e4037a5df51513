"""NVML's list of compute processes on one GPU, as real drivers answer it.

Why a module: the call exists in three versions and the bindings trip over two of them.
pynvml 13 sends the plain name to ``_v3`` and turns a driver without ``_v3`` into
``NVMLLibraryMismatchError`` (no ``NVMLError``); nvidia-ml-py 12.535.77 declared the ``_v3``
entry as 32 bytes where the driver writes 24 (nvml.h; nvitop#79), so every entry after the
first is garbage. So, as nvitop does: ``_v3`` when the bindings' entry is 24 bytes, then
``_v2``, then the plain (v1) call through our own 16-byte entry; the first that exists is kept.
Entries with pid 0 or 0xFFFFFFFF, or more memory than the GPU has, are dropped.
"""

from __future__ import annotations

import ctypes
from typing import Any

_FUNCTION_NOT_FOUND = 13
_INSUFFICIENT_SIZE = 7
_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory on WDDM and in some containers
_BAD_PIDS = (0, 0xFFFFFFFF)
VERSIONS = ("v3", "v2", "v1")


class _ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


def _plain(nvml: Any, handle: Any) -> list[tuple[int, int | None]]:
    """The unversioned call with the v1 entry (drivers before R470 have nothing else)."""
    fn = nvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses")
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == 0:
        return []
    if ret != _INSUFFICIENT_SIZE:
        raise nvml.NVMLError(ret)
    count.value = count.value * 2 + 5
    entries = (_ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), entries)
    if ret != 0:
        raise nvml.NVMLError(ret)
    return [(int(e.pid), int(e.usedGpuMemory)) for e in entries[: count.value]]


def _versioned(nvml: Any, handle: Any, version: str) -> list[tuple[int, int | None]]:
    if version == "v1":
        return _plain(nvml, handle)
    if version == "v3" and ctypes.sizeof(nvml.c_nvmlProcessInfo_v3_t) != 24:
        raise nvml.NVMLError(_FUNCTION_NOT_FOUND)  # 12.535.77's 32-byte entry: skip it
    procs = getattr(nvml, f"nvmlDeviceGetComputeRunningProcesses_{version}")(handle)
    return [(int(p.pid), p.usedGpuMemory) for p in procs]


def _missing(nvml: Any, exc: BaseException) -> bool:
    if isinstance(exc, getattr(nvml, "NVMLLibraryMismatchError", ())):
        return True
    return isinstance(exc, nvml.NVMLError) and getattr(exc, "value", None) == _FUNCTION_NOT_FOUND


def compute_processes(
    nvml: Any, handle: Any, start: int, mem_total: int | None
) -> tuple[list[tuple[int, int]], int]:
    """(pid, bytes) of the compute processes and the index in VERSIONS that answered, starting
    the probe at ``start`` (the one that worked last time). Raises the NVMLError of a version
    that exists but failed; NVMLError(FUNCTION_NOT_FOUND) when none exists."""
    for i in range(start, len(VERSIONS)):
        try:
            raw = _versioned(nvml, handle, VERSIONS[i])
        except Exception as exc:  # a missing version is skipped, a failing one raised
            if _missing(nvml, exc):
                continue
            raise
        out = []
        for pid, used in raw:
            if pid in _BAD_PIDS:
                continue
            used = 0 if used is None or used == _NOT_AVAILABLE else int(used)
            if mem_total is not None and used > mem_total:
                continue  # a bogus entry: the layout did not match after all
            out.append((pid, used))
        return out, i
    raise nvml.NVMLError(_FUNCTION_NOT_FOUND)
