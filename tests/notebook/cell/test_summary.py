"""The %%trainwatch summary and the no-widget renderings, from a History of known samples."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainwatch_lab.core.defaults import MIB
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    Alert,
    DiskRates,
    GpuState,
    PathState,
    ProcessIO,
    Sample,
)
from trainwatch_lab.notebook.cell.report import CellSummary, DeviceSummary
from trainwatch_lab.notebook.cell.summary import summarize_cell
from trainwatch_lab.notebook.cell.warnings import WarningLog
from trainwatch_lab.notebook.dashboard.snapshot import snapshot_html, snapshot_text
from trainwatch_lab.notebook.warnings_html import alerts_bundle

T0 = 1_700_000_000.0
PATH = "/data/<run> & co"  # hostile characters must be escaped in HTML


def sample(i: int, wmb: float, util: float, used_mib: int, gpu_util: float) -> Sample:
    return Sample(
        t=T0 + i,
        disks={"sda": DiskRates("sda", 10, 20, 1.0, wmb, 0.5, 4.0 + i, 1.0, 50)},
        paths={
            PATH: PathState(
                path=PATH,
                exists=True,
                mountpoint="/data",
                fstype="ext4",
                device="sda",
                kind="local",
                total_bytes=1000 * MIB,
                free_bytes=(1000 - used_mib) * MIB,
                avail_bytes=(900 - used_mib) * MIB,
            )
        },
        gpus=[GpuState(index=0, nvml_index=0, uuid="u", name="G", util_pct=gpu_util)],
        process=ProcessIO(
            pid=7,
            pids=1,
            read_chars_s=0,
            write_chars_s=wmb * MIB,
            read_bytes_s=0,
            write_bytes_s=wmb * MIB,
        ),
    )


def history() -> History:
    h = History(capacity=100)
    # t=0 is before the cell (baseline); the cell runs from t=0.5 to t=4
    for i, (wmb, used, gpu) in enumerate(
        [(0, 100, 90), (10, 110, 0), (30, 140, 0), (10, 150, 80), (0, 150, 100)]
    ):
        h.append(sample(i, wmb, 50, used, gpu))
    return h


def test_cell_summary_numbers() -> None:
    warn = Alert("disk-filling", "warning", PATH, "filling", "free space")
    log = WarningLog()
    for i in (1, 2):
        log.observe(T0 + i, [warn])
    s = summarize_cell(history(), T0 + 0.5, T0 + 4, [PATH], log.entries(), gpu_indices=None)
    assert s.samples == 4
    (dev,) = s.devices
    assert dev.device == "sda"
    assert dev.peak_write_bps == 30 * MIB
    assert dev.peak_await_ms == 8.0
    assert dev.written_bytes == 50 * MIB  # 10 + 30 + 10 + 0 MiB over 1 s steps
    (fs,) = s.filesystems
    assert fs.paths == [PATH] and fs.used_growth_bytes == 50 * MIB and fs.filesystem == "/data"
    (g,) = s.gpus
    assert g.mean_util_pct == 45.0  # 0, 0, 80, 100
    assert g.idle_s == 2.0  # two 1 s intervals under 5 %
    assert s.process_write_bytes == 50 * MIB
    assert [w.alert.code for w in s.warnings] == ["disk-filling"]  # one per condition
    text = s.to_text()
    assert text.startswith("trainwatch: cell ran 3.5 s (4 samples)\n")
    assert "disk sda: 50 MiB written during the cell (all processes)" in text
    assert "peak write 31.5 MB/s" in text and "space used on /data +50 MiB" in text
    assert "this kernel wrote 50 MiB; 50 MiB reached the disk" in text
    assert "GPU 0: mean util 45 %, idle 2 s" in text
    html = s.to_html()
    assert "&lt;run&gt; &amp; co" in html and "<run>" not in html


def test_gpu_filter_and_empty_cell() -> None:
    s = summarize_cell(history(), T0 + 0.5, T0 + 4, [PATH], [], gpu_indices=[1], gpu_note="x")
    assert s.gpus == [] and "GPU: x" in s.to_text()
    empty = summarize_cell(History(capacity=4), T0, T0 + 0.1, [], [])
    assert empty.samples == 0 and "(no sample: the sampler did not answer in time)" in (
        empty.to_text()
    )


# -- two cells on one live sampler, recorded as CellWatch takes them ----------------------

LOGS, CKPT = "/data/run/logs", "/data/run/ckpt"


def tick(t: float, wmb: float, used_mib: float, dirtied_mib_s: float, gpu: float) -> Sample:
    """A sample of a live sampler; both watched paths are on the one filesystem /data."""
    state = {
        "mountpoint": "/data",
        "fstype": "ext4",
        "device": "sda",
        "kind": "local",
        "total_bytes": 1000 * MIB,
        "free_bytes": int((1000 - used_mib) * MIB),
        "avail_bytes": int((900 - used_mib) * MIB),
    }
    return Sample(
        t=T0 + t,
        disks={"sda": DiskRates("sda", 0, 9, 0, wmb, 0, 1.0, 0, 9)},
        paths={p: PathState(path=p, exists=True, **state) for p in (LOGS, CKPT)},
        gpus=[GpuState(index=0, nvml_index=0, uuid="u", name="G", util_pct=gpu)],
        process=ProcessIO(7, 1, 0, dirtied_mib_s * MIB, 0, dirtied_mib_s * MIB),
    )


def two_cells() -> History:
    """Cell 1 (t 10.0 -> 12.0) writes 50 MiB with fsync; cell 2 (t 12.2 -> 12.25) is ``1/0``.

    Each cell has the baseline asked for as it started and the sample asked for as it ended;
    the 1 s natural ticks go on in between, and one at t 13 sees someone else's writes."""
    h = History(capacity=100)
    for t, wmb, used, dirtied, gpu in [
        (9.0, 0, 100, 0, 0),  # natural tick
        (10.0, 0, 100, 0, 0),  # cell 1 baseline (asked)
        (11.0, 30, 130, 30, 90),  # natural tick during cell 1
        (12.0, 20, 150, 20, 90),  # cell 1's end (asked): all 50 MiB on disk (fsync)
        (12.2, 5, 150, 0, 90),  # cell 2 baseline (asked): its rates are the gap's
        (12.25, 0, 150, 0, 0),  # cell 2's end (asked)
        (13.0, 80, 190, 0, 0),  # natural tick after cell 2: another process
    ]:
        h.append(tick(t, wmb, used, dirtied, gpu))
    return h


def test_a_cell_never_reuses_the_previous_cells_samples() -> None:
    h = two_cells()
    first = summarize_cell(h, T0 + 10.0, T0 + 12.0, [LOGS, CKPT], [])
    (dev,) = first.devices
    assert first.samples == 2 and dev.written_bytes == 50 * MIB
    (fs,) = first.filesystems  # two paths, one filesystem: one row
    assert fs.paths == [LOGS, CKPT] and fs.used_growth_bytes == 50 * MIB
    assert first.process_write_bytes == first.process_write_chars == 50 * MIB

    second = summarize_cell(h, T0 + 12.2, T0 + 12.25, [LOGS, CKPT], [])
    assert second.samples == 1
    (dev,) = second.devices
    assert (dev.written_bytes, dev.peak_write_bps) == (0, 0)  # not the gap's, not cell 1's
    (fs,) = second.filesystems
    assert fs.used_growth_bytes == 0 and fs.written_bytes == 0
    assert second.process_write_bytes == second.process_write_chars == 0
    (g,) = second.gpus
    assert g.mean_util_pct == 0 and math.isclose(g.idle_s, 0.05, abs_tol=1e-6)
    text = second.to_text()
    assert "(1 sample)" in text and "50 MiB" not in text
    assert "peak read 0 MB/s, peak write 0 MB/s" in text  # not cell 1's rates
    assert f"  {LOGS}: files written: not listed" in text  # a row per path, then its fs
    assert "    space used on /data +0 B; 0 B written to sda (all processes)" in text
    assert "this kernel wrote 0 B" in text and "reached" not in text


def test_a_device_first_seen_at_the_cells_end_still_counts_from_the_baseline() -> None:
    """A fresh sampler's first tick has no disk rates (they need two readings): the first
    rate covers the interval since that tick, so it still counts."""
    h = History(capacity=10)
    first = tick(0.0, 0, 100, 0, 0)
    first.disks = {}
    h.append(first)
    h.append(tick(0.5, 100, 150, 100, 0))
    s = summarize_cell(h, T0 + 0.01, T0 + 0.5, [LOGS], [])
    assert s.devices[0].written_bytes == 50 * MIB
    assert "this kernel wrote 50 MiB; 50 MiB reached the disk" in s.to_text()


def summary_with(written_mib: float | None, chars_mib: float, dirtied_mib: float) -> str:
    devices = [] if written_mib is None else [DeviceSummary("sda", 0, 0, 0, written_mib * MIB)]
    s = CellSummary(seconds=1.0, samples=1, devices=devices)
    s.process_write_chars, s.process_write_bytes = chars_mib * MIB, dirtied_mib * MIB
    return s.to_text().splitlines()[-2]


def test_page_cache_and_disk_said_plainly() -> None:
    """write_bytes counts pages when they are dirtied: what the disk wrote says how much of
    that has reached it."""
    assert summary_with(50, 50, 50).endswith("this kernel wrote 50 MiB; 50 MiB reached the disk")
    assert summary_with(10, 50, 50).endswith(
        "this kernel wrote 50 MiB; 10 MiB reached the disk, 40 MiB still in the page cache "
        "(not yet on disk)"
    )
    assert summary_with(0, 50, 50).endswith(
        "this kernel wrote 50 MiB; 50 MiB still in the page cache (not yet on disk)"
    )
    others = "network or FUSE filesystems, tmpfs, pipes, pages it had dirtied already"
    assert summary_with(0, 6, 0).endswith(
        f"this kernel wrote 6 MiB (no new data for a local disk: {others})"
    )
    assert summary_with(50, 60, 50).endswith(
        f"this kernel wrote 60 MiB (10 MiB of it no new data for a local disk: {others}); "
        "50 MiB reached the disk"
    )
    assert summary_with(None, 50, 50).endswith(
        "this kernel wrote 50 MiB; no disk statistics to tell whether it reached the disk"
    )
    assert summary_with(1, 0.01, 1).endswith("1 MiB reached the disk (counted in whole pages)")


def test_snapshots_and_alert_bundle_are_readable_without_widgets() -> None:
    h = history()
    latest = h.latest
    latest.warnings = [Alert("shared-mount", "warning", PATH, "on <nfs>", "copy later")]
    text = snapshot_text(latest, h)
    assert text.startswith("trainwatch at") and PATH in text and "disk sda" in text
    html = snapshot_html(latest, h)
    assert "&lt;nfs&gt;" in html and "var(--jp-warn-color1)" in html
    assert "#" not in html.split("<style>")[0]  # no hard-coded colours outside CSS vars
    bundle = alerts_bundle(latest.warnings)
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.trainwatch.alert+json"}
    assert "Fix: copy later" in bundle["text/plain"]
    assert snapshot_text(None).endswith("waiting for the first sample")


def test_the_snapshot_says_disk_rates_in_mb_per_s_even_when_small() -> None:
    """README: rates in MB/s everywhere but a warning's sentence; the snapshot said
    "read 147 kB/s" beside the charts' MB/s (issue 36 item 3)."""
    h = History(capacity=10)
    trickle = sample(0, 0.14, 5.0, 10, 50.0)
    trickle.disks = {"sda": DiskRates("sda", 1, 2, 0.14, 0.14, 0.5, 1.0, 0.1, 5)}  # MiB/s
    h.append(trickle)
    text, html = snapshot_text(trickle, h), snapshot_html(trickle, h)
    assert "disk sda: read 0.15 MB/s, write 0.15 MB/s" in text, text
    assert "kB/s" not in text and "kB/s" not in html


SHARE = "/mnt/share/runs"


def waits_history(seconds: int, share: float, fsync_share: float) -> History:
    """A kernel that loses ``share`` of each second to SHARE, ``fsync_share`` in fsync."""
    h = History(capacity=200)
    for i in range(seconds + 1):
        p = ProcessIO(
            pid=7, pids=1, read_chars_s=0, write_chars_s=0, read_bytes_s=0, write_bytes_s=0
        )
        p.wait_samples = 20
        p.waits = {SHARE: share, PATH: 0.0}
        p.wait_calls = {SHARE: {"fsync": fsync_share, "write": share - fsync_share}}
        h.append(
            Sample(t=T0 + i, process=p, paths={SHARE: PathState(SHARE), PATH: PathState(PATH)})
        )
    return h


def test_the_cell_summary_says_the_time_lost_to_storage() -> None:
    s = summarize_cell(waits_history(50, 0.31, 0.25), T0 + 4, T0 + 46, [SHARE, PATH], [])
    line = "this cell spent 31 % of 42 s waiting on /mnt/share/runs, mostly fsync"
    assert s.waits_lines() == [line]  # PATH: 0 %, no line of its own
    assert f"\n  {line}\n" in s.to_text()
    assert f'<div class="tw-waits">{line}</div>' in s.to_html()


def test_the_cell_summary_without_waits() -> None:
    quiet = summarize_cell(waits_history(10, 0.0, 0.0), T0 + 2, T0 + 8, [SHARE, PATH], [])
    assert quiet.waits_lines() == [
        "this cell spent no measurable time waiting on the watched paths (6 s)"
    ]
    unmeasured = summarize_cell(history(), T0 + 0.5, T0 + 4, [PATH], [])
    assert unmeasured.waits is None and unmeasured.waits_lines() == []
    assert "waiting on" not in unmeasured.to_text()


IN_KERNEL = r"""
import fcntl, os, sys, threading, time
from trainwatch_lab.notebook.dashboard.widget import new_sampler
from trainwatch_lab.notebook.cell.summary import summarize_cell
from trainwatch_lab.notebook.cell.warnings import WarningLog

share = sys.argv[1]
lock = os.path.join(share, "lock")
open(lock, "w").close()
holder = os.open(lock, os.O_RDWR)
fcntl.flock(holder, fcntl.LOCK_EX)
sampler = new_sampler([share], interval=0.5, probe=False, gpu=False).start()
time.sleep(1.2)  # two ticks: the waits are measured from the second on
start = time.time()
threading.Timer(3.0, os.close, (holder,)).start()  # a cell blocked 3 s on the lock ...
fcntl.flock(os.open(lock, os.O_RDWR), fcntl.LOCK_EX)
time.sleep(1.0)  # ... then 1 s of something else
end = sampler.tick_now(5.0).t
print(summarize_cell(sampler.history, start, end, [share], []).to_text())
sampler.close()
"""


@pytest.mark.kernel
def test_a_kernel_cell_blocked_on_its_share(tmp_path) -> None:
    """The whole path in one process, as in a kernel: its sampler, its main thread, the
    cell's summary."""
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", IN_KERNEL, str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    found = re.search(
        rf"this cell spent (\d+) % of (\S+) s waiting on {tmp_path}, mostly flock", out.stdout
    )
    assert found, out.stdout
    # looks are pooled over ticks (20 at least) but not across a change of what the loop
    # sleeps on; the tick where the lock ends still pools its mix: 78-86 % for 75 % here
    assert abs(int(found[1]) / 100 - 3.0 / float(found[2])) <= 0.2, out.stdout
