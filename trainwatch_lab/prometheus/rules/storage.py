"""The storage alerting rules: mount-unresponsive, shared-mount, slow-mount,
disk-almost-full, disk-filling, disk-saturated and checkpoint-wont-fit, thresholds from
core.defaults (see prometheus.rules.ruleset)."""

from __future__ import annotations

from ...advice.storage import FASTER_DISK_FIX, LOCAL_FIX
from ...advice.text import fmt_bytes, fmt_duration
from ...core.defaults import Defaults
from .base import ON, Rule, indent, pct, rate, rule

FULL_FIX = (
    "Free space (old runs, old checkpoints), keep fewer checkpoints (Lightning save_top_k, HF "
    "save_total_limit) or point the output at a disk with more room; many small files: pack "
    "them (tar, one HDF5/Parquet file) to free inodes."
)

FILLING_FIX = (
    "Free space or move the output to a bigger disk before then: delete old runs, keep fewer "
    "checkpoints (save_top_k / save_total_limit) or save less often."
)

SATURATED_FIX = (
    "The disk cannot keep up: put the training data on a faster or local disk or cache it in "
    "RAM (/dev/shm), read it in larger sequential chunks (fewer small files, more DataLoader "
    "workers), and write checkpoints and logs to another disk."
)


def mount_rules(d: Defaults) -> list[Rule]:
    timeout = fmt_duration(d.mount_timeout_s)
    slow = (
        f"over {d.slow_p50_ms:g} ms, or {d.slow_vs_baseline:g}x local storage measured at the "
        f"same moment and over {d.slow_ratio_min_ms:g} ms, in {d.slow_min_probes} probes in a row"
    )
    fix_slow = (
        f'{{{{ if eq $labels.shared "true" }}}}{LOCAL_FIX}{{{{ else }}}}{FASTER_DISK_FIX}'
        "{{ end }}"
    )
    return [
        rule(
            "TrainwatchMountUnresponsive",
            "mount-unresponsive",
            "critical",
            'trainwatch_path_info{verdict="unresponsive"} == 1',
            "{{ $labels.path }}",
            f"{{{{ $labels.path }}}} on {ON} does not answer",
            f"{{{{ $labels.path }}}} ({{{{ $labels.fstype }}}}, mounted at "
            f"{{{{ $labels.mountpoint }}}}) on {ON} did not answer within {timeout}; every "
            "process that touches it, the training loop included, can hang there.",
            "Check the server and the network behind {{ $labels.mountpoint }}; until it "
            "answers, write logs and checkpoints to local disk. If it stays dead, detach it "
            "with `umount -l {{ $labels.mountpoint }}`.",
        ),
        rule(
            "TrainwatchSharedMount",
            "shared-mount",
            "warning",
            'trainwatch_path_info{shared="true",verdict!="unresponsive"} == 1',
            "{{ $labels.path }}",
            f"{{{{ $labels.path }}}} on {ON} is on a shared filesystem",
            f"{{{{ $labels.path }}}} on {ON} is on a shared filesystem ({{{{ $labels.fstype }}}}"
            "); logs and checkpoints written there step by step can stall training.",
            LOCAL_FIX,
        ),
        rule(
            "TrainwatchSlowMount",
            "slow-mount",
            "warning",
            'trainwatch_path_info{verdict="slow"}\n'
            "  * on(instance, path) group_left() trainwatch_probe_p50_seconds",
            "{{ $labels.path }}",
            f"Writes to {{{{ $labels.path }}}} on {ON} are slow",
            f"Writes to {{{{ $labels.path }}}} ({{{{ $labels.fstype }}}}) on {ON} are slow: a "
            "4 KiB write + fsync takes {{ $value | humanizeDuration }} at the median "
            f"({slow}).",
            fix_slow,
        ),
    ]


def _space(d: Defaults, critical: bool) -> str:
    """Free space or inodes of a watched, writable filesystem under the limit."""
    share = d.full_critical_fraction if critical else d.full_fraction
    # as advice.storage: df's share, avail / (used + avail), the root reserve left out
    usable = (
        "(node_filesystem_size_bytes - node_filesystem_free_bytes + node_filesystem_avail_bytes)"
    )
    low = [
        f"node_filesystem_avail_bytes <= {share:g} * {usable}",
        f"node_filesystem_files_free <= {share:g} * node_filesystem_files",
    ]
    if not critical:  # on a tiny tmpfs "under 2 GiB" is always true: only larger ones
        low.insert(
            1,
            f"(node_filesystem_avail_bytes <= {d.full_bytes} "
            f"and node_filesystem_size_bytes > {d.full_bytes})",
        )
    return (
        f"node_filesystem_avail_bytes / {usable}\n"
        "  and on(instance, mountpoint) (\n    " + "\n    or ".join(low) + "\n  )\n"
        "  and on(instance, mountpoint) node_filesystem_readonly == 0\n"
        "  and on(instance, mountpoint) trainwatch_path_info"
    )


def space_rules(d: Defaults) -> list[Rule]:
    rules = []
    for severity in ("warning", "critical"):
        critical = severity == "critical"
        expr = _space(d, critical)
        if not critical:
            expr += "\n  unless on(instance, mountpoint) (\n" + indent(_space(d, True)) + "\n  )"
        limit = (
            f"{pct(d.full_critical_fraction)} or less"
            if critical
            else f"{pct(d.full_fraction)} or less (or {fmt_bytes(d.full_bytes)} on a larger disk)"
        )
        rules.append(
            rule(
                "TrainwatchDiskAlmostFull",
                "disk-almost-full",
                severity,
                expr,
                "{{ $labels.mountpoint }}",
                f"{{{{ $labels.mountpoint }}}} on {ON} is almost full",
                f"Free space or free inodes on {{{{ $labels.mountpoint }}}} ({{{{ $labels.fstype "
                f"}}}} from {{{{ $labels.device }}}}) on {ON} are {limit}: "
                "{{ $value | humanizePercentage }} of the space is free.",
                FULL_FIX,
            )
        )
    return rules


def filling_rules(d: Defaults) -> list[Rule]:
    """disk-filling: core.storage.fill's estimate, and core.storage.fill.is_trend's "has lasted" in
    PromQL."""
    ttf = "trainwatch_filesystem_seconds_to_full"
    lasted = (
        f"  and on(instance, mountpoint) trainwatch_filesystem_fill_points >= {d.fill_min_points}\n"
        "  and on(instance, mountpoint) trainwatch_filesystem_fill_trend_seconds\n"
        f"    >= clamp({d.fill_trend_share:g} * {ttf}, {d.fill_min_trend_s:g}, "
        f"{d.fill_min_span_s:g})"
    )
    ranges = {
        "warning": f"{ttf} <= {d.fill_horizon_s:g} and {ttf} >= {d.fill_critical_s:g}",
        "critical": f"{ttf} < {d.fill_critical_s:g}",
    }
    return [
        rule(
            "TrainwatchDiskFilling",
            "disk-filling",
            severity,
            f"{ranges[severity]}\n{lasted}",
            "{{ $labels.mountpoint }}",
            f"{{{{ $labels.mountpoint }}}} on {ON} fills up in {{{{ $value | humanizeDuration }}}}",
            f"{{{{ $labels.mountpoint }}}} ({{{{ $labels.fstype }}}}) on {ON} is filling: full "
            "in about {{ $value | humanizeDuration }} at the current rate (warned under "
            f"{fmt_duration(d.fill_horizon_s)}, critical under {fmt_duration(d.fill_critical_s)}).",
            FILLING_FIX,
        )
        for severity in ("warning", "critical")
    ]


def device_rules(d: Defaults, window: str) -> list[Rule]:
    util = rate("node_disk_io_time_seconds_total", window)
    waits = [
        f"{rate(f'node_disk_{op}_time_seconds_total', window)} "
        f"/ {rate(f'node_disk_{ops}_completed_total', window)} >= {d.saturated_await_ms / 1000:g}"
        for op, ops in (("read", "reads"), ("write", "writes"))
    ]
    saturated = (
        f"{util} >= {d.saturated_util_pct / 100:g}\n"
        f"  and on(instance, device) (\n    {waits[0]}\n    or {waits[1]}\n  )\n"
        "  and on(instance, device) trainwatch_path_info"
    )
    wont_fit = (
        "trainwatch_checkpoint_newest_bytes\n"
        "  > on(instance, path) group_left() (\n"
        "    (node_filesystem_avail_bytes and on(instance, mountpoint) "
        "node_filesystem_readonly == 0)\n"
        "    * on(instance, mountpoint) group_right() trainwatch_path_info\n"
        "  )"
    )
    return [
        rule(
            "TrainwatchDiskSaturated",
            "disk-saturated",
            "warning",
            saturated,
            "{{ $labels.device }}",
            f"Disk {{{{ $labels.device }}}} on {ON} is saturated",
            f"Disk {{{{ $labels.device }}}} on {ON} has been "
            "{{ $value | humanizePercentage }} busy, with requests waiting "
            f"{d.saturated_await_ms:g} ms or more, for {fmt_duration(d.saturated_for_s)} or "
            "longer.",
            SATURATED_FIX,
            for_s=d.saturated_for_s,
        ),
        rule(
            "TrainwatchCheckpointWontFit",
            "checkpoint-wont-fit",
            "critical",
            wont_fit,
            "{{ $labels.path }}",
            f"The next checkpoint in {{{{ $labels.path }}}} on {ON} will not fit",
            f"The newest checkpoint in {{{{ $labels.path }}}} on {ON} is "
            "{{ $value | humanize1024 }}B, more than the free space; the next save will fail "
            "with 'No space left on device' and can leave a truncated file.",
            "Free space (delete older checkpoints), keep fewer checkpoints (save_top_k / "
            "save_total_limit), or save to a disk with more room.",
        ),
    ]
