"""/proc/diskstats parsing and iostat -x rates: recorded snippets, crafted edge cases, and a
real loop-device ext4 that we write to."""

from __future__ import annotations

import json
import logging
import mmap
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import need_root, need_tool
from trainwatch_lab.core.model import PathState, Sample
from trainwatch_lab.core.storage.diskstats import (
    NO_DISKSTATS_NOTE,
    DiskStatsSource,
    compute_rates,
    counter_delta,
    is_whole_disk,
    parse_diskstats,
)

DATA = Path(__file__).parents[1] / "data"
MIB = 1024 * 1024


def load(name: str) -> dict:
    return parse_diskstats((DATA / name).read_text())


# -- parsing ------------------------------------------------------------------------------
def test_parses_real_20_field_lines() -> None:
    stats = load("diskstats_real_before.txt")
    assert "vda" in stats and "zram0" in stats and "loop7" in stats
    vda = stats["vda"]
    assert (vda.major, vda.minor) == (254, 0)
    assert (vda.rd_ios, vda.rd_merges, vda.rd_sectors, vda.rd_ticks) == (
        66287,
        18923,
        2249778,
        28516,
    )
    assert (vda.wr_ios, vda.wr_sectors, vda.in_flight, vda.io_ticks) == (29083, 3403768, 0, 26392)
    assert vda.time_in_queue == 44872  # field 14, not one of the discard/flush extras


def test_parses_14_field_lines_and_skips_old_7_field_partitions() -> None:
    stats = load("diskstats_k4_14fields.txt")
    assert set(stats) == {"sda", "sda1"}
    assert stats["sda"].time_in_queue == 2000
    assert stats["sda1"].io_ticks == 1700


def test_parses_18_field_lines() -> None:
    stats = load("diskstats_k418_18fields.txt")
    assert set(stats) == {"nvme0n1", "nvme0n1p1", "dm-0"}
    nvme = stats["nvme0n1"]
    assert (nvme.in_flight, nvme.io_ticks, nvme.time_in_queue) == (2, 215228, 384496)


def test_garbage_and_empty_input() -> None:
    assert parse_diskstats("") == {}
    assert parse_diskstats("not a diskstats line at all, with many words a b c d e f g\n") == {}


# -- rates --------------------------------------------------------------------------------
def test_real_recorded_rates_match_the_dd_that_ran() -> None:
    rates = compute_rates(
        load("diskstats_real_before.txt"), load("diskstats_real_after.txt"), dt_s=2.0
    )
    vda = rates["vda"]
    # dd wrote 16 x 1 MiB with O_DIRECT: +16 writes, +32768 sectors, +8 ms of write time
    assert vda.w_s == pytest.approx(16 / 2.0)
    assert vda.wmb_s == pytest.approx(16 / 2.0)
    assert vda.w_await == pytest.approx(8 / 16)
    assert vda.r_s == pytest.approx(3 / 2.0)
    assert vda.r_await == pytest.approx(1 / 3)
    assert vda.rmb_s == pytest.approx(184 * 512 / MIB / 2.0)
    assert vda.util == pytest.approx(4 / 2000 * 100)
    assert vda.aqu_sz == pytest.approx(9 / 2000)
    idle = rates["loop0"]
    assert (idle.r_s, idle.w_s, idle.r_await, idle.w_await, idle.util) == (0, 0, 0.0, 0.0, 0)


def test_counter_wrap_32_and_64_bit() -> None:
    assert counter_delta(10, 25) == 15
    assert counter_delta(2**32 - 6, 94) == 100
    assert counter_delta(2**64 - 16, 784) == 800
    r = compute_rates(load("diskstats_wrap_before.txt"), load("diskstats_wrap_after.txt"), 1.0)
    sda = r["sda"]
    assert sda.r_s == pytest.approx(100.0)  # rd_ios wrapped at 2**32
    assert sda.rmb_s == pytest.approx(800 * 512 / MIB)  # rd_sectors wrapped at 2**64
    assert sda.r_await == pytest.approx(500 / 100)  # rd_ticks wrapped at 2**32
    assert sda.w_s == pytest.approx(100.0)
    assert sda.w_await == pytest.approx(1.0)
    assert sda.util == pytest.approx(70.4)  # io_ticks wrapped
    assert sda.aqu_sz == pytest.approx(2.592)  # time_in_queue wrapped


def test_device_appearing_and_vanishing() -> None:
    r = compute_rates(load("diskstats_hotplug_before.txt"), load("diskstats_hotplug_after.txt"), 1)
    assert "sdb" not in r  # vanished
    assert "sdc" not in r  # first sight: no rate yet
    sda = r["sda"]
    assert (sda.r_s, sda.w_s) == (100, 0)
    assert sda.r_await == pytest.approx(2.0)
    assert sda.util == pytest.approx(20.0)
    assert sda.aqu_sz == pytest.approx(0.2)


def test_reset_device_is_not_mistaken_for_a_wrap() -> None:
    before = parse_diskstats("8 16 sdb 5000 0 40000 900 0 0 0 0 0 90000 900\n")
    # re-registered with other numbers, counters restarted
    replugged = parse_diskstats("8 32 sdb 10 0 80 5 0 0 0 0 0 5 5\n")
    assert compute_rates(before, replugged, 1.0) == {}
    # same major:minor but counters restarted (e.g. driver reloaded)
    restarted = parse_diskstats("8 16 sdb 10 0 80 5 0 0 0 0 0 5 5\n")
    assert compute_rates(before, restarted, 1.0) == {}


def test_util_is_clamped_and_zero_interval_gives_nothing() -> None:
    a = parse_diskstats("8 0 sda 0 0 0 0 0 0 0 0 0 1000 0\n")
    b = parse_diskstats("8 0 sda 0 0 0 0 0 0 0 0 0 2100 0\n")
    assert compute_rates(a, b, 1.0)["sda"].util == 100.0
    assert compute_rates(a, b, 0.0) == {}


# -- the source ---------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_sys(tmp_path: Path, *disks: str) -> str:
    for d in disks:
        (tmp_path / "sys" / "block" / d).mkdir(parents=True)
    return str(tmp_path / "sys")


def test_source_reports_whole_disks_and_watched_devices(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path, "nvme0n1", "dm-0")
    proc = tmp_path / "diskstats"
    proc.write_text((DATA / "diskstats_k418_18fields.txt").read_text())
    clock = Clock()
    src = DiskStatsSource(proc_path=str(proc), sys_root=sys_root, clock=clock)
    first = Sample(t=0)
    src.collect(first)
    assert first.disks == {} and "disks" not in first.notes  # no rate on first sight

    # one second later nvme0n1 and its partition each did 100 more reads
    text = proc.read_text().replace("52716 11", "52816 11").replace("52600 11", "52700 11")
    proc.write_text(text)
    clock.now += 1.0
    plain = Sample(t=1)
    src.collect(plain)
    assert set(plain.disks) == {"nvme0n1", "dm-0"}  # partitions are not whole disks
    assert plain.disks["nvme0n1"].r_s == pytest.approx(100.0)

    clock.now += 1.0
    watched = Sample(t=2, paths={"/data": PathState(path="/data", device="nvme0n1p1")})
    src.collect(watched)
    assert set(watched.disks) == {"nvme0n1", "nvme0n1p1", "dm-0"}
    assert watched.disks["nvme0n1p1"].r_s == 0.0


def test_source_leaves_loop_ram_zram_out_unless_watched(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path, "sda", "loop0", "zram0", "ram0")
    proc = tmp_path / "diskstats"
    lines = [f"{i} 0 {n} 1 0 8 1 0 0 0 0 0 1 1" for i, n in enumerate(["sda", "loop0", "zram0"])]
    proc.write_text("\n".join([*lines, "1 0 ram0 1 0 8 1 0 0 0 0 0 1 1"]) + "\n")
    clock = Clock()
    src = DiskStatsSource(proc_path=str(proc), sys_root=sys_root, clock=clock)
    src.collect(Sample(t=0))
    clock.now += 1
    s = Sample(t=1)
    src.collect(s)
    assert set(s.disks) == {"sda"}
    clock.now += 1
    s = Sample(t=2, paths={"/mnt": PathState(path="/mnt", device="loop0")})
    src.collect(s)
    assert set(s.disks) == {"sda", "loop0"}


def test_whole_disk_names_with_slashes(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path, "cciss!c0d0")
    assert is_whole_disk("cciss/c0d0", sys_root)
    assert not is_whole_disk("cciss/c0d0p1", sys_root)


@pytest.mark.parametrize("content", [None, ""])
def test_missing_or_empty_diskstats_is_a_note_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str | None
) -> None:
    proc = tmp_path / "diskstats"
    if content is not None:
        proc.write_text(content)
    src = DiskStatsSource(proc_path=str(proc), sys_root=str(tmp_path))
    with caplog.at_level(logging.INFO, logger="trainwatch_lab.core.storage.diskstats"):
        samples = [Sample(t=i) for i in range(3)]
        for s in samples:
            src.collect(s)
    assert all(s.notes["disks"] == NO_DISKSTATS_NOTE and s.disks == {} for s in samples)
    assert sum("diskstats is not available" in r.getMessage() for r in caplog.records) == 1


def test_source_on_this_machine_reports_only_whole_disks() -> None:
    if not os.path.exists("/proc/diskstats"):
        pytest.skip("no /proc/diskstats here")
    src = DiskStatsSource()
    src.collect(Sample(t=0))
    time.sleep(0.2)
    s = Sample(t=1)
    src.collect(s)
    for name, rates in s.disks.items():
        assert is_whole_disk(name) and not name.startswith(("loop", "ram", "zram"))
        assert 0 <= rates.util <= 100 and rates.r_s >= 0 and rates.w_s >= 0


# -- a real block device ------------------------------------------------------------------
def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def loop_ext4(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real ext4 on a loop device, mounted; yields (diskstats name, mountpoint)."""
    need_root()
    need_tool("losetup")
    need_tool("mkfs.ext4")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(96 * MIB)
    dev = run("losetup", "--find", "--show", str(image)).strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = False
    try:
        # no lazy init: ext4lazyinit would write in the background and blur the numbers
        run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        run("mount", dev, str(mnt))
        mounted = True
        os.sync()
        yield os.path.basename(dev), mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False, timeout=60)
        subprocess.run(["losetup", "-d", dev], check=False, timeout=60)


def test_real_loop_device_writes_show_up(loop_ext4: tuple[str, Path]) -> None:
    name, mnt = loop_ext4
    times: list[float] = []

    def clock() -> float:
        times.append(time.monotonic())
        return times[-1]

    src = DiskStatsSource(clock=clock)
    paths = {str(mnt): PathState(path=str(mnt), device=name)}
    src.collect(Sample(t=0, paths=paths))
    fd = os.open(mnt / "data.bin", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        block = os.urandom(MIB)
        for _ in range(20):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    watched = Sample(t=1, paths=paths)
    src.collect(watched)
    rates = watched.disks[name]
    written_mib = rates.wmb_s * (times[1] - times[0])
    assert rates.w_s > 0
    assert 19 <= written_mib <= 40, written_mib  # 20 MiB of data plus ext4 journal/metadata
    assert rates.w_await >= 0 and 0 <= rates.util <= 100

    unwatched = Sample(t=2)
    src.collect(unwatched)
    assert name not in unwatched.disks  # a loop device only when a watched path is on it


def steady_direct_writer(path: Path, mib_per_s: int, stop: threading.Event) -> None:
    """O_DIRECT 1 MiB writes on an absolute schedule: every write reaches the device."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, MIB)  # page-aligned, as O_DIRECT requires
    buf.write(os.urandom(MIB))
    start, n = time.monotonic(), 0
    try:
        while not stop.is_set():
            if n % 32 == 0:
                os.lseek(fd, 0, os.SEEK_SET)  # stay within the small filesystem
            os.write(fd, buf)
            n += 1
            delay = start + n / mib_per_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        os.close(fd)
        buf.close()


def test_rates_agree_with_sysstat_iostat(loop_ext4: tuple[str, Path]) -> None:
    """Same device, same interval: our numbers against iostat -x itself."""
    iostat = need_tool("iostat")
    name, mnt = loop_ext4
    stop = threading.Event()
    writer = threading.Thread(target=steady_direct_writer, args=(mnt / "f", 20, stop))
    writer.start()
    try:
        time.sleep(0.3)  # let the writer settle into its pace
        src = DiskStatsSource()
        paths = {str(mnt): PathState(path=str(mnt), device=name)}
        proc = subprocess.Popen(
            [iostat, "-dxm", "-y", "-o", "JSON", name, "2", "1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        src.collect(Sample(t=0, paths=paths))  # iostat takes its first reading now too
        out, _ = proc.communicate(timeout=60)
        ours = Sample(t=1, paths=paths)
        src.collect(ours)
    finally:
        stop.set()
        writer.join(timeout=30)
    stats = json.loads(out)["sysstat"]["hosts"][0]["statistics"][0]["disk"]
    theirs = next(d for d in stats if d["disk_device"] == name)
    r = ours.disks[name]
    assert r.w_s == pytest.approx(theirs["w/s"], rel=0.1)
    assert r.wmb_s == pytest.approx(theirs["wMB/s"], rel=0.1)
    assert r.wmb_s == pytest.approx(20, rel=0.25)  # both see the writer's pace (w/s
    # depends on how the block layer splits the 1 MiB writes)
    assert r.w_await == pytest.approx(theirs["w_await"], rel=0.3, abs=0.3)
    assert r.aqu_sz == pytest.approx(theirs.get("aqu-sz", theirs.get("avgqu-sz")), abs=0.1)
    assert r.util == pytest.approx(theirs["util"], abs=5)


def test_lines_seen_before_are_reused_and_changed_ones_parsed_again() -> None:
    """The per-tick shortcut: an unchanged line maps to the counters parsed before, a changed
    line is parsed again, and lines that are gone are forgotten (the cache stays small)."""
    from trainwatch_lab.core.storage.diskstats import parse_diskstats

    idle, busy = "8 0 sda 1 0 8 1 0 0 0 0 0 1 1", "8 16 sdb 5 0 40 9 0 0 0 0 0 9 9"
    by_line: dict = {}
    first = parse_diskstats(f"{idle}\n{busy}\n", by_line)
    assert set(by_line) == {idle, busy}
    busier = busy.replace("sdb 5 ", "sdb 6 ")
    second = parse_diskstats(f"{idle}\n{busier}\n", by_line)
    assert second["sda"] is first["sda"]
    assert second["sdb"].rd_ios == 6 and first["sdb"].rd_ios == 5
    assert set(by_line) == {idle, busier}
    assert parse_diskstats(f"{idle}\n", by_line) == {"sda": first["sda"]}
    assert set(by_line) == {idle}
