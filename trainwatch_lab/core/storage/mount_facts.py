"""What the mount table and /sys say about a mount, worked out once per mount."""

from __future__ import annotations

from dataclasses import dataclass

from .. import hostfs
from ..model import MountKind, PathState
from .blockdev import answers_locally, block_device_for, physical_disks
from .fstypes import is_network_block
from .mounts import MountEntry, classify, overlay_backing


@dataclass(frozen=True)
class MountFacts:
    """What the mount table and /sys say about one mount (no syscall on the mount itself).
    Fixed for the life of a mount, so the paths source works it out once per mount."""

    mountpoint: str
    fstype: str
    source: str
    kind: MountKind
    read_only: bool
    device: str | None
    disks: tuple[str, ...]  # the whole disks that hold its data (blockdev.physical_disks)
    shared: bool
    answers_locally: bool  # see blockdev.answers_locally: may be inspected on our own thread

    @classmethod
    def of(
        cls, entry: MountEntry, mounts: list[MountEntry], sys_root: str | None = None
    ) -> MountFacts:
        sys_root = sys_root or hostfs.current().sysfs
        kind = classify(entry)
        device = block_device_for(entry, sys_root, mounts=mounts)
        backing = overlay_backing(entry, mounts) if kind == "overlay" else None
        return cls(
            mountpoint=entry.mountpoint,
            fstype=entry.fstype,
            source=entry.source,
            kind=kind,
            read_only=entry.read_only,
            device=device,
            disks=physical_disks(device, mounts, sys_root),
            shared=(
                kind == "shared"
                or is_network_block(device)
                or (backing is not None and classify(backing) == "shared")
            ),
            answers_locally=answers_locally(entry, device, sys_root, mounts),
        )

    def apply(self, state: PathState) -> None:
        state.mountpoint, state.fstype, state.source = self.mountpoint, self.fstype, self.source
        state.kind, state.read_only = self.kind, self.read_only
        state.device, state.shared = self.device, self.shared
        state.disks = list(self.disks)


def apply_mount(
    state: PathState, entry: MountEntry, mounts: list[MountEntry], sys_root: str | None = None
) -> None:
    """Fill the mount fields of ``state`` from the mount table and /sys (no syscall on it)."""
    MountFacts.of(entry, mounts, sys_root).apply(state)
