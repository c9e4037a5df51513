"""Every storage rule, firing and not firing, on constructed Samples and History."""

from __future__ import annotations

import re
from dataclasses import replace

from trainwatch_lab.advice.advisor import Advisor, Context
from trainwatch_lab.advice.storage import (
    STORAGE_DETECTORS,
    checkpoint_wont_fit,
    disk_almost_full,
    disk_filling,
    mount_unresponsive,
    shared_mount,
    slow_mount,
)
from trainwatch_lab.advice.text import fill_text
from trainwatch_lab.core.defaults import DEFAULTS, GIB, MIB
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    Alert,
    CheckpointInfo,
    PathState,
    ProbeResult,
    Sample,
)
from trainwatch_lab.core.storage.fill import fill_filesystems

T0 = 1_800_000_000.0


def state(path: str = "/data/run", **kw: object) -> PathState:
    fields: dict[str, object] = dict(
        exists=True,
        mountpoint="/data",
        fstype="ext4",
        source="/dev/sda1",
        device="sda",
        kind="local",
        total_bytes=100 * GIB,
        free_bytes=60 * GIB,
        avail_bytes=55 * GIB,
    )
    fields.update(kw)
    if "avail_bytes" in kw and "free_bytes" not in kw:  # no root reserve unless asked
        fields["free_bytes"] = kw["avail_bytes"]
    return PathState(path=path, **fields)  # type: ignore[arg-type]


def run(detector, *states: PathState, baseline=None, defaults=DEFAULTS, t=T0) -> list[Alert]:
    sample = Sample(t=t, paths={s.path: s for s in states})
    history = History(capacity=4)
    history.append(sample)
    return list(detector(Context(sample, history, defaults, baseline)))


def probe(p50: float, p99: float | None = None) -> ProbeResult:
    return ProbeResult(p50_ms=p50, p99_ms=p99 if p99 is not None else p50 * 2, samples=16)


# -- shared-mount ---------------------------------------------------------------------


def test_shared_mount_names_fstype_source_and_latency() -> None:
    s = state(
        "/mnt/share/logs",
        fstype="fuse.sshfs",
        source="me@10.0.0.2:/export",
        kind="shared",
        shared=True,
        probe=probe(38.0),
    )
    (alert,) = run(shared_mount, s, baseline=probe(0.8))
    assert (alert.code, alert.severity, alert.subject) == (
        "shared-mount",
        "warning",
        "/mnt/share/logs",
    )
    assert "fuse.sshfs" in alert.message and "me@10.0.0.2:/export" in alert.message
    assert "38 ms" in alert.message and "0.8 ms" in alert.message
    assert "local disk" in alert.fix and "trainwatch-lab mirror" in alert.fix


def test_shared_mount_silent_on_local_and_on_dead_mounts() -> None:
    assert run(shared_mount, state()) == []
    dead = state(fstype="nfs4", shared=True, kind="shared", responsive=False)
    assert run(shared_mount, dead) == []  # mount-unresponsive says it louder


def test_shared_mount_without_probe_still_fires() -> None:
    s = state(fstype="nfs4", source="srv:/x", shared=True, kind="shared")
    (alert,) = run(shared_mount, s)
    assert "nfs4 from srv:/x" in alert.message and "fsync" not in alert.message


# -- slow-mount -----------------------------------------------------------------------

QUIET_REF = ProbeResult(0.4, 0.9, 16, where="/var/tmp", device="vda")  # re-measured, fast
BUSY_REF = ProbeResult(6.6, 19.8, 16, where="/var/tmp", device="vda")  # someone's fsync burst
SHARE = dict(mountpoint="/mnt/share", fstype="nfs4", source="srv:/x", device=None)


def slow(p50: float, runs: int = 2, ref: ProbeResult | None = QUIET_REF) -> ProbeResult:
    """A probe as ``probe_with_evidence`` reports it: ``runs`` probes in a row looked slow."""
    return replace(probe(p50), slow_runs=runs, reference=ref)


def test_slow_mount_on_a_share_names_what_was_compared() -> None:
    s = state("/mnt/share/logs", kind="shared", shared=True, probe=slow(12.0), **SHARE)
    (alert,) = run(slow_mount, s)
    assert alert.code == "slow-mount" and "12 ms" in alert.message
    assert "in 2 probes in a row" in alert.message
    assert "0.4 ms on /var/tmp (vda) measured at the same time" in alert.message
    assert "30x slower" in alert.message and "shared-mount" in alert.fix
    fast = state("/mnt/share/logs", kind="shared", shared=True, probe=slow(4.0), **SHARE)
    assert run(slow_mount, fast) == []  # 10x the 0.4 ms, but under the 5 ms any verdict needs
    fast.probe = slow(9.0, ref=ProbeResult(1.0, 2.0, 16, where="/var/tmp", device="vda"))
    assert run(slow_mount, fast) == []  # under 10 ms, and only 9x the reference


def test_a_slow_share_gets_one_fix_for_its_one_cause() -> None:
    """shared-mount and slow-mount on one path both said the whole local-mirror fix (issue
    36): slow-mount now points at shared-mount's, naming the mount."""
    s = state("/mnt/share/logs", kind="shared", shared=True, probe=slow(12.0), **SHARE)
    (shared,) = run(shared_mount, s)
    (slowed,) = run(slow_mount, s)
    assert shared.fix != slowed.fix
    assert "shared-mount" in slowed.fix and "/mnt/share" in slowed.fix
    assert "trainwatch-lab mirror" not in slowed.fix and "flush_secs" not in slowed.fix
    local = state("/data/run", probe=slow(12.0), device="sdb")
    (alert,) = run(slow_mount, local)
    assert "shared-mount" not in alert.fix  # a slow local disk has its own fix


def test_slow_mount_needs_more_than_one_slow_probe() -> None:
    s = state("/mnt/share/logs", kind="shared", shared=True, probe=slow(40.0, runs=0), **SHARE)
    assert run(slow_mount, s) == []
    s.probe = probe(40.0)  # a single probe, never confirmed
    assert run(slow_mount, s) == []


def test_a_path_is_never_slower_than_its_own_disk() -> None:
    """Issue 10: a logdir on the local disk, probed during another process's fsync burst,
    was called 16x slower than the same disk measured in a quiet moment."""
    on_vda = state("/work/logs", mountpoint="/", device="vda", probe=slow(6.57, ref=QUIET_REF))
    assert run(slow_mount, on_vda, baseline=QUIET_REF) == []
    on_vda.probe = slow(25.0, ref=QUIET_REF)
    assert run(slow_mount, on_vda, baseline=QUIET_REF) == []
    same_mount = state("/var/tmp/x", mountpoint="/var/tmp", device=None, probe=slow(25.0))
    assert run(slow_mount, same_mount, baseline=QUIET_REF) == []


def test_local_disk_slow_only_against_another_device_that_stays_fast() -> None:
    other = state("/data/run", device="sdb", probe=slow(12.0, ref=QUIET_REF))
    (alert,) = run(slow_mount, other)
    assert "faster disk" in alert.fix and "/var/tmp (vda)" in alert.message
    other.probe = slow(12.0, ref=BUSY_REF)  # the reference is slow too: the machine is busy
    assert run(slow_mount, other) == []
    other.probe = slow(12.0, ref=None)  # nothing measured at the same moment: no evidence
    assert run(slow_mount, other, baseline=QUIET_REF) == []
    unknown = state("/data/run", device=None, probe=slow(12.0))  # zfs, overlay: cannot tell
    assert run(slow_mount, unknown) == []


def test_slow_mount_ratio_needs_some_absolute_latency() -> None:
    # 1 ms is 20x a 0.05 ms tmpfs reference, yet harmless; so is one 4 ms VM timer tick
    tiny = ProbeResult(0.05, 0.1, 16, where="/dev/shm", device="sdz")
    shared = dict(kind="shared", shared=True, **SHARE)
    assert run(slow_mount, state(probe=slow(1.0, ref=tiny), **shared)) == []
    assert run(slow_mount, state(probe=slow(4.0, ref=tiny), **shared)) == []
    lenient = replace(DEFAULTS, slow_ratio_min_ms=0.5)
    assert len(run(slow_mount, state(probe=slow(1.0, ref=tiny), **shared), defaults=lenient))


def test_slow_mount_falls_back_to_the_cached_baseline_on_a_share() -> None:
    s = state(kind="shared", shared=True, probe=slow(6.0, ref=None), **SHARE)
    (alert,) = run(slow_mount, s, baseline=ProbeResult(0.2, 0.5, 16, where="/var/tmp"))
    assert "30x slower" in alert.message and "measured at the same time" not in alert.message


def test_slow_mount_threshold_from_defaults() -> None:
    shared = dict(kind="shared", shared=True, **SHARE)
    strict = replace(DEFAULTS, slow_p50_ms=1.0)
    assert len(run(slow_mount, state(probe=slow(1.5, ref=None), **shared), defaults=strict)) == 1
    assert run(slow_mount, state(probe=slow(1.5, ref=None), **shared)) == []
    assert run(slow_mount, state(probe=None, **shared)) == []
    assert run(slow_mount, state(probe=ProbeResult(None, None, 0, "read-only"), **shared)) == []


# -- mount-unresponsive ---------------------------------------------------------------


def test_mount_unresponsive_is_critical_with_umount_hint() -> None:
    dead = state(
        "/mnt/share",
        mountpoint="/mnt/share",
        fstype="fuse.sshfs",
        source="me@h:/x",
        responsive=False,
        total_bytes=None,
        avail_bytes=None,
    )
    (alert,) = run(mount_unresponsive, dead, defaults=replace(DEFAULTS, mount_timeout_s=3))
    assert alert.severity == "critical" and alert.subject == "/mnt/share"
    assert "3 s" in alert.message and "fuse.sshfs" in alert.message
    assert "umount -l /mnt/share" in alert.fix
    assert run(mount_unresponsive, state()) == []


# -- disk-almost-full -----------------------------------------------------------------


def test_almost_full_fraction_warning_and_critical() -> None:
    (warn,) = run(disk_almost_full, state(avail_bytes=5 * GIB))
    assert warn.severity == "warning"
    assert "5 GiB of 100 GiB" in warn.message and "5.0 %" in warn.message
    assert "Free at least 5 GiB" in warn.fix and "save_top_k" in warn.fix
    (crit,) = run(disk_almost_full, state(avail_bytes=GIB // 2))
    assert crit.severity == "critical"
    assert run(disk_almost_full, state(avail_bytes=11 * GIB)) == []


def test_almost_full_absolute_floor_on_a_small_disk() -> None:
    # 15 % free is above the fraction, but 1.5 GiB is under the 2 GiB floor
    (alert,) = run(disk_almost_full, state(total_bytes=10 * GIB, avail_bytes=int(1.5 * GIB)))
    assert "1.5 GiB" in alert.message and "Free at least 512 MiB" in alert.fix


def test_almost_full_not_on_an_empty_tiny_tmpfs_or_read_only() -> None:
    tiny = state(fstype="tmpfs", total_bytes=64 * MIB, avail_bytes=60 * MIB)
    assert run(disk_almost_full, tiny) == []
    assert run(disk_almost_full, state(avail_bytes=0, read_only=True)) == []
    assert run(disk_almost_full, state(total_bytes=None, avail_bytes=None)) == []


def test_almost_full_counts_inodes_too() -> None:
    many_files = state(inodes_total=1_000_000, inodes_free=5_000)
    (alert,) = run(disk_almost_full, many_files)
    assert alert.severity == "critical"  # 0.5 % of inodes left
    assert "5,000 of 1,000,000 inodes" in alert.message and "small files" in alert.fix
    both = state(avail_bytes=5 * GIB, inodes_total=1_000_000, inodes_free=50_000)
    (alert,) = run(disk_almost_full, both)
    assert alert.severity == "warning" and "5 GiB of 100 GiB" in alert.message
    assert "50,000 of 1,000,000 inodes" in alert.message
    assert run(disk_almost_full, state(inodes_total=0, inodes_free=0)) == []  # btrfs
    assert run(disk_almost_full, state(inodes_total=1000, inodes_free=500)) == []


def test_almost_full_thresholds_from_defaults() -> None:
    half = replace(DEFAULTS, full_fraction=0.5)
    assert len(run(disk_almost_full, state(avail_bytes=40 * GIB), defaults=half)) == 1
    assert run(disk_almost_full, state(avail_bytes=40 * GIB)) == []


# -- disk-filling ---------------------------------------------------------------------


def filling_history(
    path: str, avail_end: float, rate_bps: float, seconds: int, step: float = 1.0
) -> tuple[History, Sample]:
    history = History(capacity=1000)
    n = int(seconds / step) + 1
    sample = None
    for i in range(n):
        t = T0 + i * step
        avail = avail_end + rate_bps * (n - 1 - i) * step
        s = state(path, avail_bytes=int(avail), free_bytes=int(avail))
        sample = Sample(t=t, paths={path: s})
        history.append(sample)
    assert sample is not None
    return history, sample


def filling(history: History, sample: Sample, defaults=DEFAULTS) -> list[Alert]:
    fill_filesystems(sample, history, defaults)  # what the Advisor does before the rules
    return list(disk_filling(Context(sample, history, defaults, None)))


def test_disk_filling_critical_with_rate_and_time_to_full() -> None:
    history, sample = filling_history("/data/run", 3e9, 10e6, 60)  # 300 s to full
    (alert,) = filling(history, sample)
    assert alert.severity == "critical" and alert.subject == "/data/run"
    assert "10 MB/s" in alert.message and "5 min" in alert.message
    assert "for 1 min" in alert.message  # how long it has been filling
    assert re.search(r"around \d\d:\d\d", alert.message)
    fill = sample.paths["/data/run"].fill
    assert fill is not None and abs(fill.seconds_to_full - 300) < 1


def test_disk_filling_warning_inside_horizon_silent_beyond() -> None:
    history, sample = filling_history("/data/run", 20e9, 10e6, 60)  # 2000 s
    (alert,) = filling(history, sample)
    assert alert.severity == "warning" and "33 min" in alert.message
    history, sample = filling_history("/data/run", 100e9, 10e6, 60)  # 10000 s
    assert filling(history, sample) == []
    longer = replace(DEFAULTS, fill_horizon_s=20000)
    assert len(filling(history, sample, longer)) == 1


def test_disk_filling_ignores_noise_few_points_and_shrinking_usage() -> None:
    history, sample = filling_history("/data/run", 1e9, 10e3, 60)  # 10 kB/s: noise
    assert filling(history, sample) == []
    history, sample = filling_history("/data/run", 3e9, 10e6, 3)  # 4 points < 5
    assert filling(history, sample) == []
    history, sample = filling_history("/data/run", 3e9, -10e6, 60)  # space being freed
    assert filling(history, sample) == []


def test_disk_filling_needs_a_trend_not_a_burst() -> None:
    # 20 s at 10 MB/s with 300 s left: a long checkpoint write, not (yet) a trend
    history, sample = filling_history("/data/run", 3e9, 10e6, 20)
    assert filling(history, sample) == []
    assert len(filling(history, sample, replace(DEFAULTS, fill_min_span_s=20))) == 1


def test_disk_filling_sees_a_fast_fill_in_time() -> None:
    """Issue 10: a fill that ends in ENOSPC within a minute was never warned about (30 s of
    history needed whatever the rate). 30 s at 10 MB/s with 25 s left: warned."""
    history, sample = filling_history("/data/run", 250e6, 10e6, 30)
    (alert,) = filling(history, sample)
    assert alert.severity == "critical" and "25 s" in alert.message


def test_disk_filling_uses_only_the_window() -> None:
    # fast fill long ago, steady for the last 130 s: it stopped
    history = History(capacity=1000)
    sample = None
    for i in range(300):
        avail = 50e9 - 10e6 * min(i, 170)
        sample = Sample(t=T0 + i, paths={"/d": state("/d", avail_bytes=int(avail))})
        history.append(sample)
    assert sample is not None
    assert filling(history, sample) == []
    assert sample.paths["/d"].fill.trend == "steady"


def test_disk_filling_warns_once_for_every_path_on_the_filling_filesystem() -> None:
    """Free space belongs to the filesystem: a logdir and a checkpoint dir on one mount get
    one warning naming both (issue 23: one fact, one warning), and a path added a moment
    ago is named too (the mount's history) without taking the subject. A directory under a
    project quota (its own size) is fitted on its own."""
    history = History(capacity=1000)
    sample = None
    for i in range(61):
        avail = int(3e9 + 10e6 * (60 - i))
        paths = {p: state(p, avail_bytes=avail) for p in ("/data/ckpt", "/data/logs")}
        if i == 60:  # added last, sorted first: the fit still comes from the older paths
            paths["/data/a-new"] = state("/data/a-new", avail_bytes=avail)
        sample = Sample(t=T0 + i, paths=paths)
        history.append(sample)
    assert sample is not None
    alerts = filling(history, sample)
    (alert,) = alerts
    assert alert.subject == "/data/ckpt" and alert.severity == "critical"
    assert alert.message.startswith("/data is filling at 10 MB/s")
    assert "; /data/a-new, /data/ckpt and /data/logs live there." in alert.message
    assert "10 MB/s" in alert.message
    fills = {id(p.fill) for p in sample.paths.values()}
    assert len(fills) == 1  # one estimate, the same object on every path of the filesystem
    quota = state("/data/quota", avail_bytes=int(1e9), total_bytes=2 * GIB)  # no history
    sample.paths["/data/quota"] = quota
    assert "/data/quota" not in {a.subject for a in filling(history, sample)}
    assert quota.fill is not None and quota.fill.trend == "measuring"


# -- checkpoint-wont-fit --------------------------------------------------------------


def ckpt(size: int, cadence: float | None, age: float = 600) -> CheckpointInfo:
    return CheckpointInfo(
        count=3,
        newest_path="/data/run/epoch=3.ckpt",
        newest_bytes=size,
        newest_mtime=T0 - age,
        cadence_s=cadence,
    )


def test_checkpoint_wont_fit_says_when_next_save_is_due() -> None:
    s = state(avail_bytes=3 * GIB, checkpoints=ckpt(5 * GIB, cadence=1800))
    (alert,) = run(checkpoint_wont_fit, s)
    assert alert.severity == "critical" and alert.subject == "/data/run"
    assert "epoch=3.ckpt" in alert.message and "5 GiB" in alert.message
    assert "3 GiB" in alert.message and "every 30 min" in alert.message
    assert "due in about 20 min" in alert.message
    assert "Free at least 2 GiB" in alert.fix and "save_top_k" in alert.fix


def test_checkpoint_wont_fit_without_cadence_and_overdue() -> None:
    (alert,) = run(checkpoint_wont_fit, state(avail_bytes=GIB, checkpoints=ckpt(2 * GIB, None)))
    assert "due" not in alert.message
    late = state(avail_bytes=GIB, checkpoints=ckpt(2 * GIB, 300, age=900))
    (alert,) = run(checkpoint_wont_fit, late)
    assert "due now" in alert.message


def test_checkpoint_wont_fit_names_what_the_saver_can_do_and_that_it_is_off() -> None:
    """Issue 38 item 3: the fix says how to turn on room-making, a fallback and the wait."""
    (alert,) = run(checkpoint_wont_fit, state(avail_bytes=GIB, checkpoints=ckpt(2 * GIB, None)))
    for needle in ("keep=N", "fallback=DIR", "on_full='wait'", "off by default"):
        assert needle in alert.fix, needle


def test_checkpoint_that_fits_is_fine() -> None:
    assert run(checkpoint_wont_fit, state(avail_bytes=6 * GIB, checkpoints=ckpt(5 * GIB, 60))) == []
    assert run(checkpoint_wont_fit, state(avail_bytes=GIB)) == []


# -- all together ---------------------------------------------------------------------


def test_advisor_runs_storage_rules_dedupes_and_sorts() -> None:
    shared_full = state(
        "/mnt/share",
        fstype="nfs4",
        source="srv:/x",
        kind="shared",
        shared=True,
        device=None,
        avail_bytes=GIB // 4,
        probe=slow(40.0),
        checkpoints=ckpt(GIB, None),
    )
    history = History(capacity=4)
    sample = Sample(t=T0, paths={"/mnt/share": shared_full, "/data/run": state()})
    history.append(sample)
    advisor = Advisor(detectors=STORAGE_DETECTORS + STORAGE_DETECTORS, baseline=lambda: probe(1))
    alerts = advisor.evaluate(sample, history)
    assert [(a.severity, a.code) for a in alerts] == [
        ("critical", "checkpoint-wont-fit"),
        ("critical", "disk-almost-full"),
        ("warning", "shared-mount"),
        ("warning", "slow-mount"),
    ]
    assert all(a.subject == "/mnt/share" for a in alerts)
    for a in alerts:
        assert re.search(r"\d", a.message), a  # measured numbers in every message
        assert a.fix


def test_a_loop_image_on_the_reference_disk_is_the_same_storage() -> None:
    """Seen in CI: a loop ext4 on the local disk, probed while that disk was busy, was
    4x the reference measured on the disk it lives on."""
    ref = ProbeResult(0.94, 2.0, 16, where="/root", device="vda", disks=["vda"])
    loop = state("/mnt/img", mountpoint="/mnt/img", device="loop0", disks=["vda"])
    loop.probe = slow(3.61, ref=ref)
    assert run(slow_mount, loop, defaults=replace(DEFAULTS, slow_p50_ms=2.0)) == []
    elsewhere = state("/mnt/img", mountpoint="/mnt/img", device="loop0", disks=["sdb"])
    elsewhere.probe = slow(12.0, ref=ref)
    assert len(run(slow_mount, elsewhere)) == 1


def test_checkpoint_wont_fit_once_per_filesystem_about_the_biggest_save() -> None:
    """Issue 23 item 2: two run directories on one disk, both with saves bigger than the
    space left: one warning, about the bigger save."""
    small = state("/data/a", avail_bytes=GIB, checkpoints=ckpt(2 * GIB, None))
    big = state("/data/b", avail_bytes=GIB, checkpoints=ckpt(3 * GIB, None))
    (alert,) = run(checkpoint_wont_fit, small, big)
    assert alert.subject == "/data/b" and "is 3 GiB" in alert.message


def test_a_fill_the_advisor_does_not_believe_is_sent_without_numbers() -> None:
    """Issue 23 item 4: the panel read "Storage OK" beside "/: filling at 193 MB/s, full in
    7 min": a save in progress, no trend, sent with a rate and a time to full as facts."""
    advisor = Advisor(detectors=STORAGE_DETECTORS)
    history = History(capacity=100)
    for i in range(40):
        avail = 100e9 - 193e6 * max(0, i - 36)  # a save began 3 s ago
        sample = Sample(t=T0 + i, paths={"/data/run": state(avail_bytes=int(avail))})
        history.append(sample)
        alerts = advisor.evaluate(sample, history)
    sent = sample.to_json()["paths"]["/data/run"]["fill"]
    assert sent["trend"] == "filling" and alerts == []
    assert sent["rate_bps"] is None and sent["seconds_to_full"] is None
    assert fill_text(sample.paths["/data/run"].fill) == "space going down (no trend yet)"
    assert "OK" in sample.headline.text


def test_a_shared_or_dead_mount_is_one_warning_for_all_its_watched_paths() -> None:
    """Issue 23 item 2: a logdir and a checkpoint dir on one share got two shared-mount
    warnings (two identical rows in the panel); a dead mount two mount-unresponsive."""
    share = dict(mountpoint="/mnt/share", fstype="nfs4", source="srv:/x", kind="shared")
    logs = state("/mnt/share/logs", shared=True, **share)
    ckpt = state("/mnt/share/ckpt", shared=True, **share)
    (alert,) = run(shared_mount, logs, ckpt)
    assert alert.subject == "/mnt/share/logs"
    assert "/mnt/share (where /mnt/share/ckpt and /mnt/share/logs live)" in alert.message
    logs.responsive = ckpt.responsive = False
    (dead,) = run(mount_unresponsive, logs, ckpt)
    assert "/mnt/share/ckpt and /mnt/share/logs" in dead.message
    assert run(shared_mount, logs, ckpt) == []


def test_the_filling_sentence_says_its_numbers_before_any_long_path() -> None:
    """At 820 px the dashboard's one line read "/ (where /tmp/trainwatch-mirror/… lives) is
    fil…" (issue 36): the rate and the time to full come first, paths by their last names."""
    scratch = "/tmp/trainwatch-mirror-0/runs-exp1-0123456789/tb"
    history = History(capacity=100)
    sample = None
    for i in range(61):
        avail = int(3e9 + 10e6 * (60 - i))
        st = state(scratch, mountpoint="/", avail_bytes=avail)
        sample = Sample(t=T0 + i, paths={scratch: st})
        history.append(sample)
    assert sample is not None
    (alert,) = filling(history, sample)
    head = alert.message[:80]  # what a one-line view at 820 px shows
    assert head.startswith("/ is filling at 10 MB/s: ") and "full in about" in head, head
    assert (
        "trainwatch-mirror-0" not in alert.message and "…/runs-exp1-0123456789/tb" in alert.message
    )
