"""Which physical GPU each row is: the PCI bus id, and how sure the CUDA index is.

Why: the NVML index is not the CUDA index. CUDA numbers devices fastest first unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``; NVML numbers them in PCI order. The two agree when the GPUs
are identical (the fastest-first sort is stable over PCI order) or when the order is set to
PCI_BUS_ID; UUIDs in ``CUDA_VISIBLE_DEVICES`` name physical GPUs whatever the order. Each row
says which of these its ``index`` rests on (``GpuState.index_basis``), with the PCI bus id and
UUID that identify the board for ``nvidia-smi -i``.
"""

from __future__ import annotations

from collections.abc import Sequence

# GpuState.index_basis values
BY_UUID = "uuid"  # CUDA_VISIBLE_DEVICES named this GPU by UUID
BY_PCI_ORDER = "pci-order"  # PCI_BUS_ID order, or identical GPUs: CUDA's order is NVML's
ASSUMED = "assumed"  # mixed GPU models in fastest-first order: CUDA may number them otherwise


def index_basis(spec: str | None, order: str | None, names: Sequence[str]) -> list[str]:
    """Per visible GPU (in CUDA order), what its CUDA index rests on. ``spec``: the watched
    process's CUDA_VISIBLE_DEVICES; ``order``: its CUDA_DEVICE_ORDER; ``names``: the models of
    the visible GPUs."""
    tokens = [t.strip() for t in spec.split(",")] if spec else []
    pci = (order or "").strip().upper() == "PCI_BUS_ID" or len(set(names)) <= 1
    out = []
    for i in range(len(names)):
        token = tokens[i] if i < len(tokens) else ""
        if token and not token.lstrip("+-").isdigit():
            out.append(BY_UUID)
        else:
            out.append(BY_PCI_ORDER if pci else ASSUMED)
    return out


def bus_id(info: object) -> str | None:
    """The PCI bus id string of an ``nvmlPciInfo_t`` ("00000000:41:00.0")."""
    raw = getattr(info, "busId", b"") or getattr(info, "busIdLegacy", b"")
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return text or None
