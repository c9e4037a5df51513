"""Put real load on a GPU for tests/gpu/gpu_report.py: hold memory, run a duty-cycled kernel,
list CUDA's device UUIDs.

Why two backends: PyTorch where it is installed (what users run), else the CUDA driver API
through ctypes (libcuda.so.1 ships with the driver: nothing to download). The ctypes backend's
"kernel" is cuMemsetD8 over the held buffer, which the driver runs as a kernel, so NVML counts
it as utilization. Only reads and allocations: no GPU setting is changed.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any


class Missing(RuntimeError):
    """No way to use CUDA here; the message says why."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed: CUresult {rc}")


class DriverApi:
    """The CUDA driver API through ctypes: one context on device ``index``."""

    name = "ctypes libcuda (cuMemAlloc, cuMemsetD8)"

    def __init__(self, index: int = 0) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise Missing(f"libcuda.so.1 does not load: {exc}") from None
        _check(self.lib.cuInit(0), "cuInit")
        self.ctx = ctypes.c_void_p()
        if index >= 0:
            dev = ctypes.c_int()
            _check(self.lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
            _check(self.lib.cuCtxCreate_v2(ctypes.byref(self.ctx), 0, dev), "cuCtxCreate")
        self.ptr = ctypes.c_uint64()
        self.size = 0

    def hold(self, nbytes: int) -> None:
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        _check(self.lib.cuMemAlloc_v2(ctypes.byref(self.ptr), nbytes), "cuMemAlloc")
        self.size = nbytes

    def work(self, seconds: float) -> None:
        """The GPU busy for ``seconds``: memsets of the held buffer, back to back."""
        if not self.size:
            self.hold(256 << 20)
        self.lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            _check(self.lib.cuMemsetD8_v2(self.ptr.value, 1, self.size), "cuMemsetD8")
            _check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def uuids(self) -> list[str]:
        """CUDA's device UUIDs in CUDA's order (as CUDA_VISIBLE_DEVICES and
        CUDA_DEVICE_ORDER leave it), ``GPU-...`` like NVML's."""
        count = ctypes.c_int()
        _check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        get = getattr(self.lib, "cuDeviceGetUuid_v2", None) or self.lib.cuDeviceGetUuid
        out = []
        for i in range(count.value):
            dev, raw = ctypes.c_int(), (ctypes.c_ubyte * 16)()
            _check(self.lib.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
            _check(get(raw, dev), "cuDeviceGetUuid")
            h = bytes(raw).hex()
            out.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
        return out


class Torch:
    """The same through PyTorch."""

    name = "torch"

    def __init__(self, index: int = 0) -> None:
        import torch

        if not torch.cuda.is_available():
            raise Missing("torch is installed but torch.cuda.is_available() is False")
        self.torch = torch
        self.device = torch.device("cuda", index)
        torch.cuda.init()
        self.held: Any = None

    def hold(self, nbytes: int) -> None:
        self.held = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)

    def work(self, seconds: float) -> None:
        x = self.torch.randn(2048, 2048, device=self.device)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(8):
                x = (x @ x).tanh()
            self.torch.cuda.synchronize(self.device)

    def uuids(self) -> list[str]:
        return DriverApi(index=-1).uuids()


def backend(choice: str = "auto", index: int = 0) -> Any:
    """torch when importable (``auto``), else the driver API."""
    if choice in ("auto", "torch"):
        try:
            return Torch(index)
        except ImportError:
            if choice == "torch":
                raise Missing("torch is not installed") from None
    return DriverApi(index)


def duty(cuda: Any, on_s: float, off_s: float, seconds: float) -> None:
    """Busy ``on_s`` of every ``on_s + off_s`` for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        cuda.work(on_s)
        time.sleep(off_s)
