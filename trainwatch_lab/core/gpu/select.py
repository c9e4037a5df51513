"""Which GPUs a surface shows: ``--gpu``, ``c.TrainWatch.gpu`` and ``%trainwatch --gpu``.

Why UUIDs besides indices: a CUDA index names a different board in every process whose
``CUDA_VISIBLE_DEVICES`` differs, and a MIG instance has no index of its own at all; its UUID
(``MIG-...``, as ``nvidia-smi -L`` prints it) is the only name that holds everywhere. A
selector is an ``int`` (the index as the watched process's CUDA sees it) or a UUID string
(``GPU-...``, ``MIG-...``, or a unique prefix, as CUDA_VISIBLE_DEVICES takes them). A GPU
row matches a UUID selector by its own UUID or by the UUID of one of its MIG instances.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import mig as gpu_mig

Selector = int | str
USAGE = "--gpu takes GPU indices like 0 or 0,1, UUIDs like GPU-8f3a or MIG-4f1c, or none"


def _key(uuid: str) -> str:
    """A UUID as compared here: lower case, without ``GPU-``/``MIG-``; the pre-R470 MIG form
    ``MIG-GPU-<uuid>/<gi>/<ci>`` compares as its parent's UUID."""
    text = gpu_mig.key(uuid).split("/", 1)[0]
    return text[4:] if text.startswith("gpu-") else text


def _is_uuid(token: str) -> bool:
    low = token.lower()
    return low.startswith(("gpu-", "mig-")) and len(low) > 4 and " " not in low


class GpuSelection(list[Selector]):
    """The selectors the user gave, as a list (indices sorted first, then UUIDs in their
    order); ``gpu in selection`` takes a GPU row (``GpuState``: index, UUID, MIG instances)
    or a bare index."""

    def __contains__(self, item: object) -> bool:
        if isinstance(item, int) and not isinstance(item, bool):
            return any(s == item for s in self if isinstance(s, int))
        if isinstance(item, str):
            return any(isinstance(s, str) and _key(item).startswith(_key(s)) for s in self)
        return self.matches(item)

    def matches(self, gpu: Any) -> bool:
        """Whether a GPU row is selected: by its index, its UUID or one of its MIG UUIDs."""
        if getattr(gpu, "index", None) in self:
            return True
        uuids = [getattr(gpu, "uuid", "") or ""]
        uuids += [m.get("uuid") or "" for m in getattr(gpu, "mig", None) or ()]
        return any(u and u in self for u in uuids)

    def indices(self, gpus: Iterable[Any]) -> list[int]:
        """The CUDA indices of the selected rows among ``gpus`` (for series keyed by index)."""
        return sorted({g.index for g in gpus if self.matches(g)})

    def keep(self, rows: list[Any], notes: dict[str, str]) -> list[Any]:
        """The selected GPU rows; none: ``notes`` say so (``gpu_selection`` tells
        gpu-unavailable that a selection missed, not that a driver is wanting)."""
        kept = [row for row in rows if self.matches(row)]
        if not kept:
            wanted = ", ".join(map(str, self))
            present = ", ".join(f"{row.index} ({row.uuid})" for row in rows)
            notes["gpu_selection"] = f"the GPU selection {wanted} matches no GPU here"
            notes["gpus"] = f"none of the GPUs {wanted} is present (here: {present})"
        return kept

    @property
    def uuids(self) -> list[str]:
        return [s for s in self if isinstance(s, str)]


def as_selection(gpus: Sequence[Selector] | None) -> GpuSelection | None:
    """A selection from what a caller passed (a GpuSelection, a list of indices, ``None``)."""
    if gpus is None or isinstance(gpus, GpuSelection):
        return gpus
    return GpuSelection(_ordered(gpus))


def _ordered(items: Iterable[Selector]) -> list[Selector]:
    ints = sorted({int(s) for s in items if isinstance(s, int)})
    seen: list[str] = []
    for s in items:
        if isinstance(s, str) and s not in seen:
            seen.append(s)
    return [*ints, *seen]


def parse(text: str) -> GpuSelection:
    """``0,1`` -> [0, 1]; ``0,MIG-4f1c`` -> [0, "MIG-4f1c"]; ``none``/``off`` -> [] (GPU
    monitoring off). Raises ValueError with the one line to show."""
    if text.strip().lower() in ("none", "off"):
        return GpuSelection()
    items = [t.strip() for t in text.split(",")]
    out: list[Selector] = []
    for token in items:
        if token.isdigit():
            out.append(int(token))
        elif _is_uuid(token):
            out.append(token)
        else:
            raise ValueError(f"{USAGE}; got {text!r}")
    return GpuSelection(_ordered(out))


def parse_gpu_selection(text: str) -> list[int | str] | None:
    """The ``--gpu`` syntax of every surface (the magics, ``serve``, ``c.TrainWatch.gpu``):
    ``0,1`` -> [0, 1] (indices as CUDA sees them), ``0,MIG-4f1c`` -> [0, "MIG-4f1c"] (GPU or
    MIG UUIDs, or unique prefixes of them), ``none``/``off`` -> [] (GPU monitoring off). The
    result is a list (core.gpu.select.GpuSelection) whose ``gpu in selection`` takes a GPU
    row. Raises ValueError with the one line to show; each surface wraps it in its own usage
    error."""

    return parse(text)
