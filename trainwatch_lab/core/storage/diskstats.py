"""Disk I/O as ``iostat -x`` shows it, computed from ``/proc/diskstats`` directly.

psutil drops the in-flight and weighted-time fields, so it cannot give aqu-sz; we read the
file ourselves and apply sysstat's formulas. Reading /proc never touches a mount, so this
source is safe on the sampler thread even when a network share is dead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from .. import hostfs
from ..defaults import MIB
from ..model import DiskRates, Sample, path_devices
from ..procfile import ProcFile

log = logging.getLogger(__name__)

SECTOR_BYTES = 512
EXCLUDED_PREFIXES = ("loop", "ram", "zram")
NO_DISKSTATS_NOTE = (
    "/proc/diskstats is not available here (e.g. gVisor or a serverless container): "
    "disk I/O charts are off; space and latency still work"
)


class DiskCounters(NamedTuple):
    """The 11 classic counters of one /proc/diskstats line (discard/flush fields ignored).
    A tuple: every tick builds one per device and subtracts them field by field."""

    major: int
    minor: int
    name: str
    rd_ios: int
    rd_merges: int
    rd_sectors: int
    rd_ticks: int  # ms spent by completed reads
    wr_ios: int
    wr_merges: int
    wr_sectors: int
    wr_ticks: int
    in_flight: int  # a gauge, not a counter
    io_ticks: int  # ms the device had I/O in flight (-> %util)
    time_in_queue: int  # weighted ms (-> aqu-sz)


COUNTERS_FROM = 3  # DiskCounters[3:] are the numbers after major, minor, name


def parse_line(line: str) -> DiskCounters | None:
    """One /proc/diskstats line, or None for a line without the 14 classic fields (kernels
    2.6.25+; 4.18+ add 4 discard fields, 5.5+ 2 flush fields): older 7-field partition lines
    and garbage carry no timing, so no iostat -x metric can come from them."""
    parts = line.split()
    if len(parts) < 14:
        return None
    try:
        return DiskCounters(int(parts[0]), int(parts[1]), parts[2], *map(int, parts[3:14]))
    except ValueError:
        return None


def parse_diskstats(
    text: str, by_line: dict[str, DiskCounters] | None = None
) -> dict[str, DiskCounters]:
    """Every device of a /proc/diskstats text.

    ``by_line``, when given, maps the lines of the previous call to their counters and is
    left holding this call's: an idle device's line does not change between ticks, so it is
    looked up instead of parsed again."""
    known = dict(by_line) if by_line is not None else {}
    if by_line is not None:
        by_line.clear()
    result: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        counters = known.get(line) or parse_line(line)
        if counters is None:
            continue
        result[counters.name] = counters
        if by_line is not None:
            by_line[line] = counters
    return result


def counter_delta(prev: int, cur: int) -> int:
    """Difference of a monotonically increasing kernel counter, wrap-safe like sysstat:
    a counter that went down wrapped at 2**32 if it was below that, else at 2**64."""
    if cur >= prev:
        return cur - prev
    return cur + (2**32 if prev < 2**32 else 2**64) - prev


def _looks_reset(prev: DiskCounters, cur: DiskCounters, dt_ms: float) -> bool:
    """A device re-registered under the same name restarts from zero, which the wrap rule
    would turn into absurd rates. io_ticks cannot grow faster than wall time, so a
    "wrapped" io_ticks delta far beyond the interval means a reset, not a wrap."""
    if (prev.major, prev.minor) != (cur.major, cur.minor):
        return True
    return counter_delta(prev.io_ticks, cur.io_ticks) > 2 * dt_ms + 1000


def rates_for(prev: DiskCounters, cur: DiskCounters, dt_s: float) -> DiskRates | None:
    """iostat -x metrics of one device between two readings ``dt_s`` seconds apart."""
    dt_ms = dt_s * 1000.0
    if dt_s <= 0 or _looks_reset(prev, cur, dt_ms):
        return None
    (rd_ios, _, rd_sectors, rd_ticks, wr_ios, _, wr_sectors, wr_ticks, _, io_ticks, queue) = (
        counter_delta(a, b) for a, b in zip(prev[COUNTERS_FROM:], cur[COUNTERS_FROM:], strict=True)
    )
    return DiskRates(
        device=cur.name,
        r_s=rd_ios / dt_s,
        w_s=wr_ios / dt_s,
        rmb_s=rd_sectors * SECTOR_BYTES / MIB / dt_s,
        wmb_s=wr_sectors * SECTOR_BYTES / MIB / dt_s,
        r_await=rd_ticks / rd_ios if rd_ios else 0.0,
        w_await=wr_ticks / wr_ios if wr_ios else 0.0,
        aqu_sz=queue / dt_ms,
        util=min(100.0, io_ticks / dt_ms * 100.0),
    )


def compute_rates(
    prev: dict[str, DiskCounters], cur: dict[str, DiskCounters], dt_s: float
) -> dict[str, DiskRates]:
    """Rates for every device present in both readings. A device seen for the first time
    has no rate yet; one that vanished is simply absent."""
    out: dict[str, DiskRates] = {}
    for name, now in cur.items():
        before = prev.get(name)
        if before is None:
            continue
        rates = rates_for(before, now, dt_s)
        if rates is not None:
            out[name] = rates
    return out


def is_whole_disk(name: str, sys_root: str | None = None) -> bool:
    """The kernel lists whole disks (not partitions) under /sys/block; a '/' in a
    diskstats name (cciss/c0d0) is '!' there."""
    sys_root = sys_root or hostfs.current().sysfs
    return os.path.exists(os.path.join(sys_root, "block", name.replace("/", "!")))


class DiskStatsSource:
    """Fills ``sample.disks`` with iostat -x rates of whole disks and watched devices.

    Loop, ram and zram devices are left out unless a watched path lives on one. A device
    appears from its second reading on (a rate needs two). Must run after the paths source,
    whose ``PathState.device`` names the devices that are always included.
    """

    name = "disks"

    def __init__(
        self,
        proc_path: str | None = None,
        sys_root: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        host = hostfs.current()  # the host's diskstats and /sys/block by default
        self.proc_path = proc_path or host.proc("diskstats")
        self.sys_root = sys_root or host.sysfs
        self.clock = clock
        self._prev: dict[str, DiskCounters] = {}
        self._prev_t: float | None = None
        self._whole: dict[tuple[str, int, int], bool] = {}
        self._by_line: dict[str, DiskCounters] = {}  # see parse_diskstats
        self._latest: dict[str, DiskCounters] = {}  # see counters()
        self._file = ProcFile(self.proc_path)  # kept open: see core.procfile
        self._noted = False
        self._lock = threading.Lock()

    def _read(self) -> str:
        try:
            return self._file.read().decode("ascii", errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        self._file.close()

    def _wanted(self, name: str, major: int, minor: int, watched: set[str]) -> bool:
        if name in watched:
            return True
        if name.startswith(EXCLUDED_PREFIXES):
            return False
        key = (name, major, minor)
        whole = self._whole.get(key)
        if whole is None:
            whole = self._whole[key] = is_whole_disk(name, self.sys_root)
        return whole

    def collect(self, sample: Sample) -> None:
        text = self._read()
        now = self.clock()
        with self._lock:  # every device, so one watched from the next tick on has a rate
            cur = parse_diskstats(text, self._by_line)
        if not cur:
            with self._lock:
                self._latest = {}
            sample.notes[self.name] = NO_DISKSTATS_NOTE
            if not self._noted:
                self._noted = True
                log.info("trainwatch: %s", NO_DISKSTATS_NOTE)
            return
        watched = set(path_devices(sample))
        with self._lock:
            prev, prev_t = self._prev, self._prev_t
            self._prev, self._prev_t = cur, now
            wanted = {n: c for n, c in cur.items() if self._wanted(n, c.major, c.minor, watched)}
            self._latest = wanted
            if len(self._whole) > 4 * len(cur) + 64:  # devices come and go: stay bounded
                self._whole.clear()
        if prev_t is None:
            return
        sample.disks.update(compute_rates(prev, wanted, now - prev_t))

    def counters(self) -> dict[str, DiskCounters]:
        """The raw cumulative counters of the latest reading, for the devices ``sample.disks``
        covers (from the first reading on: a counter needs no second one). For exporters
        (node_exporter's ``node_disk_*_total``): a scrape reads them from memory, never
        from /proc."""
        with self._lock:
            return dict(self._latest)
