"""The data every surface shares: one Sample per tick, plain dataclasses, JSON-ready.

The JSON shape of a Sample is the contract of ``watch --json``, ``GET snapshot`` and the
WebSocket stream (see ARCHITECTURE.md); change it only together with those.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal

from .defaults import MIB

_ATOMIC = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # one entry per dataclass met: bounded


@dataclass(slots=True)
class _Box:
    """One value, for handing a rare kind of value to ``dataclasses.asdict`` itself."""

    value: Any


def _plain(value: Any) -> Any:
    """``dataclasses.asdict``'s conversion of one value, without its cost: asdict deep-copies
    every leaf and walks ``fields()`` each time, which made JSON-encoding a sample the largest
    part of the server's tick (issue 33). Same result: nested dataclasses become dicts,
    lists, tuples and dicts are copied; anything else (a namedtuple, a dict subclass, an
    object) goes through asdict itself."""
    kind = type(value)
    if kind in _ATOMIC:
        return value  # (deepcopy returns these as they are)
    if kind is list:
        return [_plain(v) for v in value]
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return dataclasses.asdict(_Box(value))["value"]


def asdict(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict(obj)``, faster (see ``_plain``)."""
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    return {name: _plain(getattr(obj, name)) for name in names}


Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

# "pseudo": a kernel filesystem (proc, sysfs, devtmpfs, cgroup...): never storage, never probed
MountKind = Literal["local", "shared", "memory", "overlay", "pseudo", "unknown"]
# "not-storage": a device node, a FIFO, a socket or a path on a kernel pseudo-filesystem
Verdict = Literal["ok", "shared", "slow", "unresponsive", "missing", "not-storage"]


@dataclass(slots=True)
class Alert:
    """The record of one warning (JSON ``warnings[]``): a stable ``code`` (see ARCHITECTURE.md),
    its severity and subject, the measured message and a fix the user can act on.

    The class keeps the name Alert: a name ending in "Warning" reads as a Python warning
    category, and ``Warning`` itself is a builtin. Users only ever see the word warning.
    """

    code: str
    severity: Severity
    subject: str
    message: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> tuple[str, str]:
        """Identity of the condition: the same code on the same subject is one condition."""
        return (self.code, self.subject)


@dataclass(slots=True)
class DiskRates:
    """iostat -x extended metrics of one block device over the last interval."""

    device: str
    r_s: float
    w_s: float
    rmb_s: float
    wmb_s: float
    r_await: float
    w_await: float
    aqu_sz: float
    util: float

    @property
    def read_bps(self) -> float:
        """Bytes read per second: ``rmb_s`` counts MiB/s like ``iostat -m``, the text says MB/s."""
        return self.rmb_s * MIB

    @property
    def write_bps(self) -> float:
        return self.wmb_s * MIB

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ProbeResult:
    """Latency of small write + fsync, measured in the directory itself.

    One slow probe proves nothing (somebody else's fsync burst slows every disk alike), so a
    probe that looks slow is repeated at once while the local reference is measured again on
    its own storage: ``slow_runs`` counts the probes in a row that looked slow, ``reference``
    is that measurement (``where``/``device`` say what it measured).
    """

    p50_ms: float | None
    p99_ms: float | None
    samples: int
    error: str | None = None
    slow_runs: int = 0
    reference: ProbeResult | None = None
    where: str | None = None  # the directory measured (set on the local reference)
    device: str | None = None  # its block device, as in PathState.device
    disks: list[str] = field(default_factory=list)  # ... and the disks under it (PathState)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "samples": self.samples,
        }
        if self.slow_runs:
            data["slow_runs"] = self.slow_runs
        if self.reference is not None:
            data["reference"] = self.reference.to_json()
        if self.where is not None:
            data["where"], data["device"], data["disks"] = self.where, self.device, self.disks
        return data


@dataclass(slots=True)
class CheckpointInfo:
    """Checkpoint saves in a watched directory: files there, or subfolders holding them
    (the Hugging Face ``checkpoint-500/`` layout)."""

    count: int
    newest_path: str
    newest_bytes: int
    newest_mtime: float
    cadence_s: float | None  # median spacing of saves when they come regularly

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FillTrend = Literal["measuring", "filling", "steady", "freeing"]


@dataclass(slots=True)
class FillState:
    """How fast the free space of one filesystem shrinks: computed once per tick in Python
    (core.storage.fill) and shared by every watched path on that filesystem, so the rule, the CLI,
    the notebook and the panel all show the same numbers."""

    filesystem: str  # its mount point
    trend: FillTrend
    rate_bps: float | None = None  # bytes per second; > 0 while free space shrinks
    seconds_to_full: float | None = None  # at this rate, from the latest reading
    trend_s: float = 0.0  # how long free space has gone down without being freed
    points: int = 0  # readings in that stretch
    quiet_s: float = 0.0  # since free space last went down (the time to full counts down)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def df_used_fraction(total: Any, free: Any, avail: Any) -> Any:
    """df's Use% as a fraction (coreutils df.c): used / (used + avail), used = total - free.
    Blocks reserved for root count neither as used nor as available, so a disk whose user
    space is full reads 100 % (total - avail over total would not). Plain arithmetic: it
    also takes numpy arrays (a chart's whole history at once); None where nothing is usable.
    """
    used = total - free
    room = used + avail
    if isinstance(room, (int, float)):
        return used / room if room > 0 else None
    return used / room


@dataclass(slots=True)
class PathState:
    """What we know about one watched path: its mount, its space, how fast it answers."""

    path: str
    exists: bool = False
    mountpoint: str | None = None
    fstype: str | None = None
    source: str | None = None
    device: str | None = None  # whole-disk name in /proc/diskstats (e.g. "nvme0n1"), if any
    disks: list[str] = field(default_factory=list)  # the whole disks holding its data
    kind: MountKind = "unknown"
    shared: bool = False
    read_only: bool = False
    total_bytes: int | None = None
    free_bytes: int | None = None  # f_bfree: free blocks, the ones reserved for root included
    avail_bytes: int | None = None  # f_bavail (df Avail): what a user may still write: "free"
    inodes_total: int | None = None
    inodes_free: int | None = None
    responsive: bool = True
    probe: ProbeResult | None = None
    checkpoints: CheckpointInfo | None = None
    fill: FillState | None = None  # of its filesystem (the same object for every path on it)
    error: str | None = None
    # what the path is ("directory", "file", "FIFO", "character device"...); None when it
    # does not exist (yet) or nothing answered
    file_type: str | None = None
    # where it was looked at (and probed): the path itself, or its nearest existing ancestor
    # when it is not created yet; None when nothing answered or it can never be created
    checked_at: str | None = None
    note: str | None = None  # one line the user should read with the numbers (not yet there...)
    # where a path found by process discovery came from, one line per reason:
    # "pid 4242 `python train.py --lr 3e-4`, event file" (core.processes.discovery); empty otherwise
    labels: list[str] = field(default_factory=list)
    # the quota that binds here (core.storage.quota): {kind, id, name, limit_bytes, used_bytes,
    # inode_limit, inodes_used}; set only when it leaves less than the filesystem, and then
    # avail_bytes (and the inode figures) are what it leaves
    quota: dict[str, Any] | None = None

    @property
    def used_bytes(self) -> int | None:
        """df's Used: the blocks in use (total less free, the root reserve not counted)."""
        if self.total_bytes is None or self.free_bytes is None:
            return None
        return max(0, self.total_bytes - self.free_bytes)

    @property
    def reserved_bytes(self) -> int | None:
        """Free blocks only root may write (ext4 reserves 5 % by default)."""
        if self.free_bytes is None or self.avail_bytes is None:
            return None
        return max(0, self.free_bytes - self.avail_bytes)

    @property
    def used_fraction(self) -> float | None:
        """df's Use%, as a fraction: used / (used + avail) (see df_used_fraction)."""
        if self.total_bytes is None or self.free_bytes is None or self.avail_bytes is None:
            return None
        return df_used_fraction(self.total_bytes, self.free_bytes, self.avail_bytes)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["probe"] = self.probe.to_json() if self.probe else None
        data["checkpoints"] = self.checkpoints.to_json() if self.checkpoints else None
        # derived once here, so every view shows df's numbers without recomputing them
        data["used_bytes"] = self.used_bytes
        data["reserved_bytes"] = self.reserved_bytes
        used = self.used_fraction
        data["used_pct"] = None if used is None else 100.0 * used
        return data


@dataclass(slots=True)
class ProcessIO:
    """I/O rates of the watched process tree.

    ``*_chars_s`` count every read/write syscall (network and FUSE filesystems included);
    ``*_bytes_s`` what was read from or dirtied for a block device: a write is counted when
    its pages are dirtied, not when they reach the disk (the device counters say that).
    """

    pid: int
    pids: int
    read_chars_s: float
    write_chars_s: float
    read_bytes_s: float
    write_bytes_s: float
    main_thread: dict[str, Any] | None = None  # where the main thread waits (GPU issue)
    # time lost to storage (core.processes.waits): watched path -> fraction (0-1) of the last
    # interval
    # the main thread slept in a system call on a file under it; every watched path is a
    # key while measured (0.0 included), none while not (see notes["waits"])
    waits: dict[str, float] = field(default_factory=dict)
    # ... the same for its worker processes (DataLoader workers), averaged over them
    worker_waits: dict[str, float] = field(default_factory=dict)
    # per watched path, its fraction split by system call ({"fsync": 0.29, "write": 0.02})
    wait_calls: dict[str, dict[str, float]] = field(default_factory=dict)
    worker_wait_calls: dict[str, dict[str, float]] = field(default_factory=dict)
    # per watched path, the file waited on most (the main thread's, else the workers')
    wait_files: dict[str, str] = field(default_factory=dict)
    # ``waits`` over the charts' window (Defaults.window_s, 10 min): what a panel shows
    waits_window: dict[str, float] = field(default_factory=dict)
    waits_elsewhere: float | None = None  # the main thread on files under no watched path
    # ... asleep on no file at all: a pipe or queue (its DataLoader workers), a lock, a GPU
    wait_other: float | None = None
    wait_samples: int = 0  # looks at the main thread during this interval (10 a second)
    wait_workers: int = 0  # worker processes measured
    # when the work being judged began (epoch s): the running cell's start in a kernel that
    # says so, else the process's start; io-bound judges no time before it (an idle kernel's
    # minutes before the cell are no I/O-bound training)
    running_since: float | None = None
    running_what: str = "process"  # "cell" or "process": what running_since is the start of

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class TrainingProcess:
    """A training process found on this machine (core.processes.discovery): a script in a terminal,
    under tmux or nohup, that holds a GPU or writes event files or checkpoints. One row of
    the panel; ``paths`` are the directories it made the sampler watch."""

    pid: int
    command: str  # its command line, shortened to one row
    cwd: str | None
    reasons: list[str]  # why it counts: "gpu", "event file", "checkpoint"
    paths: dict[str, list[str]] = field(default_factory=dict)  # watched dir -> its labels
    # CUDA indices (GpuState.index) of the GPUs it has open; None when only NVML says it
    # holds memory and its device files are not visible here
    gpus: list[int] | None = None
    gpu_mem_bytes: int | None = None  # over the visible GPUs, from NVML's process list
    io: ProcessIO | None = None  # its process tree's I/O rates
    # where its main thread waits (core.processes.threadwait.task_wait): state, wchan, syscall,
    # fd_path
    main_thread: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["io"] = self.io.to_json() if self.io is not None else None
        return data


@dataclass(slots=True)
class GpuState:
    """One GPU as NVML reports it this tick; ``None`` where the GPU does not support a field."""

    index: int  # index as the user's CUDA sees it (CUDA_VISIBLE_DEVICES applied)
    nvml_index: int
    uuid: str
    name: str
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    pcie_rx_bps: float | None = None
    pcie_tx_bps: float | None = None
    clock_reasons: list[str] = field(default_factory=list)
    process_mem_bytes: int | None = None  # held by the watched process tree
    lost: bool = False
    xid_errors: list[int] = field(default_factory=list)  # XID events NVML reported this tick
    ecc_uncorrected: int | None = None  # volatile uncorrectable ECC errors (since driver load)
    # which physical GPU this row is (core.gpu.numbering): its PCI bus id (with uuid and
    # nvml_index, what `nvidia-smi -i` takes), and what ``index`` rests on: "uuid",
    # "pci-order" or "assumed" (mixed models in CUDA's fastest-first order)
    pci_bus_id: str | None = None
    index_basis: str = "pci-order"
    # MIG (core.gpu.mig): None where the driver cannot say; per instance its uuid, gpu and
    # compute instance ids and memory (NVML gives no utilization for MIG instances)
    mig_mode: bool | None = None
    mig: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Headline:
    """The one line a surface opens with (advice.headline): the verdict ("Storage OK", "1
    warning"), the facts beside it, and the status bar's short form."""

    level: Literal["ok", "warning", "critical"]
    verdict: str
    facts: list[str] = field(default_factory=list)
    text: str = ""  # verdict and facts, " · " between them
    brief: str = ""  # the status bar ("GPU 87 % · disk 45 MB/s · ⚠ 1")
    notes: int = 0  # info notes (gpu-unavailable...): shown quietly, never as a warning

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Sample:
    """Everything one tick measured. Sources fill their part; the Sampler adds warnings."""

    t: float
    disks: dict[str, DiskRates] = field(default_factory=dict)
    paths: dict[str, PathState] = field(default_factory=dict)
    gpus: list[GpuState] = field(default_factory=list)
    process: ProcessIO | None = None
    notes: dict[str, str] = field(default_factory=dict)  # source name -> why it has no data
    warnings: list[Alert] = field(default_factory=list)
    # server only: running kernel id -> {pid, cwd, name, execution_state, io, gpu_mem_bytes}
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    headline: Headline | None = None  # set by the Advisor with the warnings
    # training processes found on this machine (core.processes.discovery), by pid; empty without
    # discovery
    processes: list[TrainingProcess] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "disks": {name: d.to_json() for name, d in self.disks.items()},
            "paths": {p: s.to_json() for p, s in self.paths.items()},
            "gpus": [g.to_json() for g in self.gpus],
            "process": self.process.to_json() if self.process else None,
            "notes": dict(self.notes),
            "warnings": [w.to_json() for w in self.warnings],
            "kernels": {k: dict(v) for k, v in self.kernels.items()},
            "headline": self.headline.to_json() if self.headline else None,
            "processes": [p.to_json() for p in self.processes],
        }


def _load(cls: Any, data: Any) -> Any:
    """A dataclass from its ``to_json`` object; keys it does not know (the figures derived
    for the views, such as ``used_pct``) are left out. None stays None."""
    if not isinstance(data, dict):
        return None
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _probe(data: Any) -> ProbeResult | None:
    probe = _load(ProbeResult, data)
    if probe is not None:
        probe.reference = _probe(data.get("reference"))
    return probe


def _path_state(data: dict[str, Any]) -> PathState:
    state = _load(PathState, data)
    state.probe = _probe(data.get("probe"))
    state.checkpoints = _load(CheckpointInfo, data.get("checkpoints"))
    state.fill = _load(FillState, data.get("fill"))
    return state


def _training_process(data: dict[str, Any]) -> TrainingProcess:
    row = _load(TrainingProcess, data)
    row.io = _load(ProcessIO, data.get("io"))
    return row


def path_state_from_json(data: dict[str, Any]) -> PathState:
    """The PathState that ``PathState.to_json`` wrote."""
    return _path_state(data)


def alert_from_json(data: dict[str, Any]) -> Alert:
    """The Alert that ``Alert.to_json`` wrote."""
    return _load(Alert, data)


def probe_from_json(data: dict[str, Any] | None) -> ProbeResult | None:
    """The ProbeResult that ``ProbeResult.to_json`` wrote (None for None)."""
    return _probe(data)


def sample_from_json(data: dict[str, Any]) -> Sample:
    """The Sample that ``Sample.to_json`` wrote: how a kernel attached to its server's sampler
    reads the judged samples it is sent (the same numbers and warnings as every other view).
    Fields this version does not know are left out, so an older kernel reads a newer server."""
    return Sample(
        t=float(data["t"]),
        disks={name: _load(DiskRates, d) for name, d in (data.get("disks") or {}).items()},
        paths={p: _path_state(s) for p, s in (data.get("paths") or {}).items()},
        gpus=[_load(GpuState, g) for g in data.get("gpus") or ()],
        process=_load(ProcessIO, data.get("process")),
        notes=dict(data.get("notes") or {}),
        warnings=[_load(Alert, w) for w in data.get("warnings") or ()],
        kernels={k: dict(v) for k, v in (data.get("kernels") or {}).items()},
        headline=_load(Headline, data.get("headline")),
        processes=[_training_process(p) for p in data.get("processes") or ()],
    )


def json_safe(obj: Any) -> Any:
    """``obj`` with every non-finite float as None: JSON has no NaN/Infinity, and strict
    parsers (browsers, ``jq``) reject them. Every surface that writes JSON uses this one."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    """Strict JSON (browsers reject NaN/Infinity): non-finite numbers become null."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(json_safe(obj), allow_nan=False, separators=(",", ":"))


def path_devices(sample: Sample) -> list[str]:
    """The block devices under the watched paths, sorted; none when no path has one."""
    return sorted({p.device for p in sample.paths.values() if p.device})


def watched_devices(sample: Sample) -> list[str]:
    """The block devices under the watched paths (every disk when no path has one): the
    devices every surface charts and sums, computed in one place."""
    return path_devices(sample) or sorted(sample.disks)
