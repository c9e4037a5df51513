"""NVIDIA GPUs through NVML (the ``pynvml`` module of ``nvidia-ml-py``), cheaply and safely.

Why this shape: the sampler ticks every second next to a training loop, so each tick makes
only the NVML calls that can change (utilization, memory, power, temperature, clock-event
reasons); names, UUIDs, handles and power limits are cached for ``gpu_static_ttl_s``, the
process list is read every ``gpu_processes_every_s`` and PCIe throughput (each call samples
the bus for ~20 ms in the driver) every ``gpu_pcie_every_s``. Every failure - no library, no
driver, no devices, a function this GPU does not support, a GPU that fell off the bus - ends as
data (``None`` fields, ``GpuState.lost``, ``sample.notes["gpus"]``), never as an exception.

In a container with its own PID namespace process memory is matched by open device files
(core.gpu.container). Devices are labelled as the watched process's CUDA sees them:
``CUDA_VISIBLE_DEVICES`` (indices or UUID prefixes) decides which GPUs are reported and their
``index``; ``nvml_index`` is the physical one. CUDA's default enumeration order (fastest
first) is assumed to match NVML's PCI order, which holds on the usual machines with identical
GPUs (or CUDA_DEVICE_ORDER=PCI_BUS_ID).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

from ..defaults import DEFAULTS, Defaults
from ..model import GpuState, Sample
from . import container as gpu_container
from . import mig as gpu_mig
from . import static as gpu_static
from . import utilization as gpu_util
from .health import MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC, XidEvents
from .procs import compute_processes
from .select import GpuSelection
from .static import TrackedGpu as _Gpu
from .static import visible_devices

log = logging.getLogger(__name__)

__all__ = ["CLOCK_REASONS", "GpuSource", "decode_clock_reasons", "visible_devices"]

# nvmlClocksEventReason* bits (nvml.h), decoded to stable names for charts and messages.
CLOCK_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal"),
    (0x040, "hw_thermal"),
    (0x080, "hw_power_brake"),
    (0x100, "display_clock"),
)

# NVML return codes we treat specially (values from nvml.h; pynvml names them the same).
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_PERMANENT = {_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND}

# Calls NVML renamed: the newest name first. The "Throttle" reasons call predates driver 535;
# it and nvmlDeviceGetTemperature are deprecated in NVML 13 and go in CUDA 14, while drivers
# before ~550 lack nvmlDeviceGetTemperatureV (same arguments through pynvml).
VERSIONED: dict[str, tuple[str, ...]] = {
    "temp": ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
    "reasons": (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ),
}


def decode_clock_reasons(mask: int) -> list[str]:
    """Names of the set clock-event reason bits (unknown bits become ``bit_0x...``)."""
    names = [name for bit, name in CLOCK_REASONS if mask & bit]
    known = 0
    for bit, _ in CLOCK_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def _process_tree(pid: int) -> set[int]:
    """The watched pid and all its descendants (DataLoader workers, subprocesses)."""
    pids = {pid}
    try:
        import psutil

        pids.update(p.pid for p in psutil.Process(pid).children(recursive=True))
    except Exception:  # gone, no permission, psutil missing: the pid alone
        pass
    return pids


class GpuSource:
    """Fills ``sample.gpus`` with the GPUs visible to the watched process (``pid``, default
    this process), only those ``select`` names when given (``serve --gpu``,
    ``c.TrainWatch.gpu``: indices, GPU or MIG UUIDs), so every surface and rule of that
    sampler sees the same GPUs; initialises NVML lazily on the first ``collect`` (the sampler
    thread)."""

    name = "gpus"

    def __init__(
        self,
        pid: int | None = None,
        defaults: Defaults = DEFAULTS,
        select: GpuSelection | None = None,
    ) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.defaults = defaults
        self.select = select
        self.nvml_calls = 0  # NVML API calls made so far (the benchmark reads this)
        self._nvml: Any = None
        self._reason: str | None = None  # why there is no GPU data
        self._retry_at = -math.inf
        self._gpus: list[_Gpu] = []
        self._static_at = -math.inf
        self._procs_at = -math.inf
        self._proc_mem: dict[int, int] = {}
        # the newest name first; a driver without it (FUNCTION_NOT_FOUND) moves on for good
        self._fns: dict[str, list[str]] = {k: list(v) for k, v in VERSIONED.items()}
        self._host_pids: bool | None = None  # NVML's PIDs are the host's, not ours
        self._proc_note: str | None = None  # how process memory was attributed
        self._xid = XidEvents()
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------------
    def collect(self, sample: Sample) -> None:
        with self._lock:
            now = time.monotonic()
            if self._nvml is None and not self._start(now):
                sample.notes["gpus"] = self._reason or "NVML is not available"
                return
            if now - self._static_at >= self.defaults.gpu_static_ttl_s:
                self._refresh_static(now)
            if not self._gpus:
                sample.notes["gpus"] = self._reason or "no NVIDIA GPU is visible"
                return
            if now - self._procs_at >= self.defaults.gpu_processes_every_s:
                self._refresh_processes(now)
            self._drain_xids()
            rows = [self._read(g, now) for g in self._gpus]
            if self.select is not None:
                rows = self.select.keep(rows, sample.notes)
            sample.gpus.extend(rows)
            if self._proc_note:
                sample.notes["gpu_processes"] = self._proc_note
            if any(g.mig_mode for g in self._gpus):
                sample.notes["gpu_mig"] = gpu_mig.NOTE

    def process_memory(self) -> dict[int, int]:
        """pid -> GPU memory in bytes over the visible GPUs, from the latest process read."""
        with self._lock:
            return dict(self._proc_mem)

    def close(self) -> None:
        with self._lock:
            nvml, self._nvml = self._nvml, None
            self._gpus = []
            self._static_at = -math.inf
            self._retry_at = -math.inf
        if nvml is not None:
            self._xid.close(self._call_on(nvml))
            self._xid = XidEvents()
            try:
                self.nvml_calls += 1
                nvml.nvmlShutdown()
            except Exception:
                log.debug("nvmlShutdown failed", exc_info=True)

    # -- startup and the slow fields -------------------------------------------------
    def _start(self, now: float) -> bool:
        if now < self._retry_at:
            return False
        self._retry_at = now + self.defaults.gpu_static_ttl_s  # a driver may load later
        try:
            import pynvml
        except ImportError:
            self._reason = "the nvidia-ml-py package (pynvml) is not installed"
            return False
        try:
            self.nvml_calls += 1
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                self._reason = "no NVIDIA driver on this machine (libnvidia-ml.so.1 not found)"
            elif code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
                self._reason = "the NVIDIA driver is not loaded (NVML: Driver Not Loaded)"
            else:
                self._reason = f"NVML could not start: {exc}"
            return False
        except Exception as exc:  # OSError from a broken library, anything else
            self._reason = f"NVML could not start: {type(exc).__name__}: {exc}"
            return False
        self._nvml = pynvml
        self._reason = None
        return True

    def _call(self, fn: str, *args: Any) -> Any:
        self.nvml_calls += 1
        return getattr(self._nvml, fn)(*args)

    def _call_on(self, nvml: Any) -> Any:
        def call(fn: str, *args: Any) -> Any:
            self.nvml_calls += 1
            return getattr(nvml, fn)(*args)

        return call

    def _drain_xids(self) -> None:
        """Hand this tick's XID events to their GPUs (registered as they are first seen)."""
        by_uuid = {g.uuid: g for g in self._gpus}
        for g in self._gpus:
            g.xids = []
            if not g.lost:
                self._xid.register(self._nvml, self._call, g.handle, g.uuid)
        for uuid, xid in self._xid.drain(self._nvml, self._call):
            if uuid in by_uuid:
                by_uuid[uuid].xids.append(xid)

    def _refresh_static(self, now: float) -> None:
        gpu_static.refresh(self, now)

    # -- the fast fields -------------------------------------------------------------
    def _query(self, gpu: _Gpu, what: str, fn: str, *args: Any) -> Any:
        """One NVML call on one GPU; ``None`` when unsupported (then never asked again) or
        failing; a lost GPU is marked and never queried again. ``fn`` "" means the first name
        in ``VERSIONED[what]`` this driver has."""
        if gpu.lost or what in gpu.unsupported:
            return None
        name = fn or self._fns[what][0]
        try:
            return self._call(name, gpu.handle, *args)
        except (self._nvml.NVMLError, AttributeError) as exc:  # AttributeError: old pynvml
            code = getattr(exc, "value", _FUNCTION_NOT_FOUND)
            if code == _FUNCTION_NOT_FOUND and not fn and len(self._fns[what]) > 1:
                self.nvml_calls -= 1  # no such symbol: the driver was not called
                self._fns[what].pop(0)
                return self._query(gpu, what, fn, *args)
            self._failed(gpu, what, code)
            return None
        except Exception:  # a binding mismatch must not reach a cell
            log.debug("NVML %s failed", name, exc_info=True)
            gpu.unsupported.add(what)
            return None

    def _failed(self, gpu: _Gpu, what: str, code: int | None) -> None:
        """Lost: never asked again; unsupported: this field never again; else transient
        (UNKNOWN, TIMEOUT, ...): asked again next tick."""
        if code == _GPU_IS_LOST:
            gpu.lost = True
            log.info("GPU %s (%s) is lost: NVML stops querying it", gpu.index, gpu.uuid)
        elif code in _PERMANENT:
            gpu.unsupported.add(what)

    def _util(self, gpu: _Gpu, state: GpuState) -> None:
        """Utilization: the mean of the driver's samples since the last tick where it has
        new ones (core.gpu.utilization), else the UtilizationRates reading."""
        util = self._query(gpu, "util", "nvmlDeviceGetUtilizationRates")
        if util is not None:
            state.util_pct = float(util.gpu)
            state.mem_util_pct = float(util.memory)
        if gpu.lost or "samples" in gpu.unsupported:
            return
        try:
            mean, gpu.samples_at_us = gpu_util.mean_since(self._nvml, gpu.handle, gpu.samples_at_us)
        except self._nvml.NVMLError as exc:
            self.nvml_calls += 1
            self._failed(gpu, "samples", getattr(exc, "value", None))
            return
        except Exception:  # a binding mismatch must not reach a cell
            log.debug("NVML samples failed", exc_info=True)
            gpu.unsupported.add("samples")
            return
        self.nvml_calls += 1 if mean is None else 2  # the size query, then the fill
        if mean is not None:
            state.util_pct = mean

    def _read(self, gpu: _Gpu, now: float) -> GpuState:
        state = GpuState(
            index=gpu.index,
            nvml_index=gpu.nvml_index,
            uuid=gpu.uuid,
            name=gpu.name,
            power_limit_w=gpu.power_limit_w,
            process_mem_bytes=gpu.process_mem_bytes,
            pci_bus_id=gpu.pci_bus_id,
            index_basis=gpu.index_basis,
        )
        if gpu.mig_mode and not gpu.lost:  # the parent refuses these: the instances say
            state.mig = gpu_mig.read_rows(self, gpu)
            state.mem_used_bytes, state.mem_total_bytes = gpu_mig.parent_memory(state.mig)
        else:
            self._util(gpu, state)
            mem = self._query(gpu, "mem", "nvmlDeviceGetMemoryInfo")
            if mem is not None:
                state.mem_used_bytes = int(mem.used)
                state.mem_total_bytes = gpu.mem_total = int(mem.total)
        power = self._query(gpu, "power", "nvmlDeviceGetPowerUsage")
        state.power_w = power / 1000.0 if power is not None else None
        temp = self._query(gpu, "temp", "", 0)  # NVML_TEMPERATURE_GPU
        state.temp_c = float(temp) if temp is not None else None
        mask = self._query(gpu, "reasons", "")
        state.clock_reasons = decode_clock_reasons(int(mask)) if mask is not None else []
        state.xid_errors = list(gpu.xids)
        state.ecc_uncorrected = self._query(
            gpu, "ecc", "nvmlDeviceGetTotalEccErrors", MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC
        )
        if now - gpu.pcie_at >= self.defaults.gpu_pcie_every_s:
            gpu.pcie_at = now
            tx = self._query(gpu, "pcie", "nvmlDeviceGetPcieThroughput", 0)  # TX_BYTES, KB/s
            rx = self._query(gpu, "pcie", "nvmlDeviceGetPcieThroughput", 1)  # RX_BYTES
            gpu.pcie = (
                rx * 1024.0 if rx is not None else None,
                tx * 1024.0 if tx is not None else None,
            )
        state.pcie_rx_bps, state.pcie_tx_bps = gpu.pcie
        state.mig_mode = gpu.mig_mode
        state.lost = gpu.lost
        return state

    def _refresh_processes(self, now: float) -> None:
        """Who holds GPU memory, and how much of it belongs to the watched process tree."""
        self._procs_at = now
        tree = _process_tree(self.pid)
        if self._host_pids is None:
            self._host_pids = gpu_container.nested_pid_namespace()
        if self._host_pids and self._refresh_by_device(tree):
            return
        totals: dict[int, int] = {}
        for gpu in self._gpus:
            procs = self._procs(gpu)
            if procs is None:
                gpu.process_mem_bytes = None
                continue
            mine = 0
            for pid, used in procs:
                totals[pid] = totals.get(pid, 0) + used
                if pid in tree:
                    mine += used
            gpu.process_mem_bytes = mine
            gpu_mig.attribute(gpu, tree)
        self._proc_mem = totals

    def _refresh_by_device(self, tree: set[int]) -> bool:
        """In a container: NVML's host PIDs matched to ours through open /dev/nvidia<minor>.
        False (nothing changed) when no process here holds one: NVML's PIDs are then used."""
        holders = gpu_container.device_holders()
        if not holders:
            self._proc_note = gpu_container.NVML_PIDS_NOTE
            return False
        totals: dict[int, int] = {}
        exact = True
        for gpu in self._gpus:
            procs = self._procs(gpu)
            if gpu.minor is None and procs is not None:
                gpu.minor = self._query(gpu, "minor", "nvmlDeviceGetMinorNumber")
            if procs is None or gpu.minor is None:
                gpu.process_mem_bytes = None
                continue
            local = [pid for pid, minors in holders.items() if gpu.minor in minors]
            shares, whole = gpu_container.attribute(procs, local)
            exact = exact and whole
            for pid, used in shares.items():
                totals[pid] = totals.get(pid, 0) + used
            gpu.process_mem_bytes = sum(used for pid, used in shares.items() if pid in tree)
        self._proc_mem = totals
        self._proc_note = gpu_container.note(exact)
        return True

    def _procs(self, gpu: _Gpu) -> list[tuple[int, int]] | None:
        """The GPU's compute processes through the first call version the driver has (on a
        MIG-enabled GPU, its instances')."""
        if gpu.mig_mode and not gpu.lost:
            return gpu_mig.read_processes(self, gpu, lambda h, total: self._procs_of(gpu, h, total))
        return self._procs_of(gpu, gpu.handle, gpu.mem_total)

    def _procs_of(
        self, gpu: _Gpu, handle: Any, mem_total: int | None
    ) -> list[tuple[int, int]] | None:
        """The compute processes of ``handle`` (the GPU's own, or one of its MIG instances')."""
        if gpu.lost or "procs" in gpu.unsupported:
            return None
        try:
            procs, gpu.procs_version = compute_processes(
                self._nvml, handle, gpu.procs_version, mem_total
            )
            self.nvml_calls += 2 if procs else 1  # the size query, then the fill
            return procs
        except self._nvml.NVMLError as exc:
            self.nvml_calls += 1
            code = getattr(exc, "value", None)
            if code == _GPU_IS_LOST:
                gpu.lost = True
            elif code in _PERMANENT:
                gpu.unsupported.add("procs")
            return None
        except Exception:  # a binding mismatch must not reach a cell
            log.debug("NVML process list failed", exc_info=True)
            gpu.unsupported.add("procs")
            return None
