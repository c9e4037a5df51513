"""Whose GPU memory is it, when NVML's PIDs are not ours (containers).

Why: the NVIDIA driver does not support PID namespaces (NVIDIA/nvidia-docker#1483): NVML
reports host PIDs, so inside a container with its own PID namespace none of them is in the
watched process tree and every GPU looks unused by it. What the container can see is which of
its processes hold the GPU's device file (``/dev/nvidia<minor>``, the minor from
``nvmlDeviceGetMinorNumber``) open - CUDA keeps it open for the whole life of a context. So
memory is attributed by open device files there: a GPU held by local processes gets the memory
NVML lists for it, all of it when NVML lists no more processes than hold it here, else (the GPU
is shared with another container) the smallest entries, one per local holder: a lower bound.
When no process here holds a device file (a fake NVML in CI, a driver that maps PIDs), NVML's
PIDs are used as they are. Either way ``sample.notes["gpu_processes"]`` says which was used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .. import hostfs

DEV_PREFIX = "/dev/nvidia"


# PROC_PID_INIT_INO (include/linux/proc_ns.h): the inode of the host's (initial) PID namespace
INIT_PID_NS_INO = 0xEFFFFFFC


def nested_pid_namespace(ns_path: str = "/proc/self/ns/pid") -> bool:
    """True when this process lives in a PID namespace other than the host's: NVML's PIDs are
    then not ours. (``NSpid`` cannot tell: a container's own /proc shows one PID there.)"""
    try:
        return os.stat(ns_path).st_ino != INIT_PID_NS_INO
    except OSError:
        return False


def _minors_open(pid: int) -> set[int]:
    """The NVIDIA device minors a process holds open (unreadable processes hold none)."""
    out: set[int] = set()
    fd_dir = f"{hostfs.procfs()}/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        tail = target[len(DEV_PREFIX) :] if target.startswith(DEV_PREFIX) else ""
        if tail.isdigit():
            out.add(int(tail))
    return out


def device_holders(pids: Iterable[int] | None = None) -> dict[int, set[int]]:
    """pid -> NVIDIA minors it holds open, over ``pids`` (default: every visible process)."""
    if pids is None:
        pids = (int(p) for p in os.listdir(hostfs.procfs()) if p.isdigit())
    holders = {}
    for pid in pids:
        minors = _minors_open(pid)
        if minors:
            holders[pid] = minors
    return holders


def attribute(entries: list[tuple[int, int]], holders: list[int]) -> tuple[dict[int, int], bool]:
    """Split one GPU's NVML entries (host pid, bytes) over the local ``holders`` (pids with its
    device open): ({local pid: bytes}, exact). Exact when NVML lists no more processes than
    hold the device here; else each holder gets one of the smallest entries (a lower bound).
    With several holders and one total the split is even: NVML cannot tell them apart."""
    if not holders or not entries:
        return {}, True
    sizes = sorted(used for _, used in entries)
    exact = len(sizes) <= len(holders)
    total = sum(sizes) if exact else sum(sizes[: len(holders)])
    share, rest = divmod(total, len(holders))
    out = {pid: share for pid in sorted(holders)}
    out[min(holders)] += rest
    return out, exact


NVML_PIDS_NOTE = (
    "GPU memory attributed by NVML's PIDs, though this process runs in its own PID namespace: "
    "no process here holds /dev/nvidia* open"
)


def note(exact: bool) -> str:
    """The line in ``sample.notes["gpu_processes"]`` that says which way memory was found."""
    base = (
        "GPU memory attributed by open /dev/nvidia* files: NVML reports host PIDs and this "
        "process runs in its own PID namespace (a container)"
    )
    if exact:
        return base
    return base + "; a GPU is shared with processes outside it, so its figure is a lower bound"
