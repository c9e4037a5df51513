"""What NVML on this machine answers, for tests/gpu/gpu_report.py (and, without CUDA, against the
fake libnvidia-ml.so.1 in tests/gpu/test_nvml_report.py).

Why apart from the CUDA half: everything here needs only NVML, so it runs and is tested on a
machine without a GPU; nothing here changes a GPU setting (every call is a read).
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.metadata
import os
import statistics
import time
from typing import Any

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.gpu.procs import compute_processes
from trainwatch_lab.core.gpu.source import GpuSource
from trainwatch_lab.core.model import Sample

# every NVML function trainwatch_lab calls (core.gpu.source*, through pynvml or its own ctypes)
SYMBOLS = (
    "nvmlInitWithFlags",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetSamples",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
)


class Missing(RuntimeError):
    """A prerequisite is missing: the report says which, in one line, and exits 2."""


def start() -> Any:
    """pynvml, initialised; Missing with the reason otherwise."""
    try:
        import pynvml
    except ImportError:
        raise Missing("the nvidia-ml-py package (pynvml) is not installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise Missing(f"NVML does not start here ({exc}): no NVIDIA driver or GPU") from None
    except OSError as exc:
        raise Missing(f"libnvidia-ml.so.1 does not load: {exc}") from None
    if pynvml.nvmlDeviceGetCount() == 0:
        raise Missing("NVML found no NVIDIA GPU")
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def versions(nvml: Any) -> dict[str, str]:
    """Driver, NVML, CUDA driver and binding versions ("missing" where the call is absent)."""
    out = {}
    for key, fn in (
        ("driver", "nvmlSystemGetDriverVersion"),
        ("nvml", "nvmlSystemGetNVMLVersion"),
        ("cuda_driver", "nvmlSystemGetCudaDriverVersion_v2"),
    ):
        try:
            out[key] = _text(getattr(nvml, fn)())
        except Exception as exc:  # FUNCTION_NOT_FOUND on old drivers (and on the fake)
            out[key] = f"missing ({type(exc).__name__})"
    try:
        out["nvidia-ml-py"] = importlib.metadata.version("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        out["nvidia-ml-py"] = "not installed as a distribution"
    return out


def symbols() -> dict[str, bool]:
    """Which of the functions trainwatch_lab calls this libnvidia-ml.so.1 exports."""
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    return {name: hasattr(lib, name) for name in SYMBOLS}


def ns_pid_line() -> str:
    """``NSpid:`` of /proc/self/status: more than one number means a nested PID namespace."""
    with open("/proc/self/status") as f:
        return next((line.strip() for line in f if line.startswith("NSpid:")), "NSpid: (none)")


def nvml_pids(nvml: Any) -> dict[int, list[tuple[int, int]]]:
    """NVML index -> (pid, bytes) of its compute processes, as NVML reports them."""
    out = {}
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        out[i] = []
        for h in [handle, *_mig_handles(nvml, handle)]:  # MIG: the parent may refuse
            try:
                out[i] += compute_processes(nvml, h, 0, None)[0]
            except nvml.NVMLError as exc:
                print(f"  gpu {i}: a process list was refused: {exc}")
    return out


def _mig_handles(nvml: Any, handle: Any) -> list[Any]:
    try:
        if nvml.nvmlDeviceGetMigMode(handle)[0] != 1:
            return []
        count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except nvml.NVMLError:
        return []
    out = []
    for k in range(count):
        try:
            out.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, k))
        except nvml.NVMLError:
            continue
    return out


def pid_verdict(listed: dict[int, list[tuple[int, int]]], ours: set[int]) -> str:
    """Whether NVML's PIDs are ours: "equal", "host" (GPU processes listed, none of ours
    although ours hold memory) or "unknown" (nothing listed)."""
    pids = {pid for procs in listed.values() for pid, _ in procs}
    if not pids:
        return "unknown"
    return "equal" if pids & ours else "host"


def mig_report(nvml: Any) -> list[str]:
    """MIG mode of each GPU (read only) and its instances."""
    lines = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        try:
            current, pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError as exc:
            lines.append(f"gpu {i}: MIG mode not available ({exc})")
            continue
        lines.append(f"gpu {i}: MIG mode current={current} pending={pending}")
        for k, mig in enumerate(_mig_handles(nvml, handle)):
            mem = nvml.nvmlDeviceGetMemoryInfo(mig)
            lines.append(
                f"  instance {k}: {_text(nvml.nvmlDeviceGetUUID(mig))} "
                f"{mem.used / 2**30:.2f}/{mem.total / 2**30:.2f} GiB"
            )
    return lines


def tick_cost(ticks: int = 8, pcie_every_s: float | None = None) -> dict[str, float]:
    """The GPU source's cost per tick (ms) with PCIe read every ``pcie_every_s`` (0: every
    tick, ~20 ms per read in the driver; default: the default) and NVML calls per tick, over
    ``ticks`` back-to-back ticks after the first (which enumerates and reads everything)."""
    every = DEFAULTS.gpu_pcie_every_s if pcie_every_s is None else pcie_every_s
    defaults = dataclasses.replace(
        DEFAULTS, gpu_pcie_every_s=every, gpu_processes_every_s=DEFAULTS.interval_s
    )
    source = GpuSource(pid=os.getpid(), defaults=defaults)
    source.collect(Sample(t=time.time()))  # the first tick enumerates: not a steady one
    costs, calls = [], source.nvml_calls
    for _ in range(ticks):
        start = time.perf_counter()
        source.collect(Sample(t=time.time()))
        costs.append((time.perf_counter() - start) * 1e3)
    calls = (source.nvml_calls - calls) / ticks
    source.close()
    return {
        "median_ms": statistics.median(costs),
        "max_ms": max(costs),
        "nvml_calls": calls,
    }
