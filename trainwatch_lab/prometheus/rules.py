"""Prometheus alerting rules that mirror trainwatch's warnings, thresholds from the defaults.

Each alert carries the warning's stable ``code``, its ``severity`` and its ``subject`` as
labels (as ``trainwatch_warning`` series do), the message and the fix as annotations. A rule
is PromQL over the exported numbers wherever Prometheus can decide alone (space, fill, disk
saturation, checkpoints, GPUs), with the same thresholds as the Advisor
(``core.defaults``), so ``rules`` printed with other defaults alert at other values. Where
only the agent has the evidence, the rule reads the agent's verdict: ``slow-mount`` compares
a probe with local storage measured at the same moment, ``mount-unresponsive`` is a statfs
that timed out; Prometheus cannot redo either.

``gpu-starved`` sees the disk-busy half of the agent's rule (reads pinned at a ceiling needs
the process's history); ``gpu-throttled`` reads the clock-event reasons and utilization,
``gpu-error`` the agent's verdict (XID events and ECC counts are not exported).
The YAML is written by hand (a list of plain mappings, strings JSON-quoted, which YAML
reads as they are): no YAML library needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..advice.storage import FASTER_DISK_FIX, LOCAL_FIX
from ..advice.text import fmt_bytes, fmt_duration
from ..core.defaults import DEFAULTS, Defaults

Rule = dict[str, Any]
WINDOW = re.compile(r"^[1-9][0-9]*(s|m|h)$")
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
STARVED_FIX = (
    "Feed the GPU from faster storage: copy the dataset to local NVMe (or RAM) before "
    "training, read it in larger shards (WebDataset, TFRecord, Arrow), and use "
    "DataLoader(num_workers=4 or more, pin_memory=True, prefetch_factor=4, "
    "persistent_workers=True); keep logs and checkpoints off the data disk."
)
ON = "{{ $labels.instance }}"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def _rule(
    alert: str,
    code: str,
    severity: str,
    expr: str,
    subject: str,
    summary: str,
    message: str,
    fix: str,
    for_s: float = 0.0,
) -> Rule:
    rule: Rule = {"alert": alert, "expr": expr.strip()}
    if for_s > 0:
        rule["for"] = f"{for_s:g}s"
    rule["labels"] = {"code": code, "severity": severity, "subject": subject}
    rule["annotations"] = {"summary": summary, "message": message, "fix": fix}
    return rule


def _mounts(d: Defaults) -> list[Rule]:
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
        _rule(
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
        _rule(
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
        _rule(
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
    low = [
        f"node_filesystem_avail_bytes < {share:g} * node_filesystem_size_bytes",
        f"node_filesystem_files_free < {share:g} * node_filesystem_files",
    ]
    if not critical:  # on a tiny tmpfs "under 2 GiB" is always true: only larger ones
        low.insert(
            1,
            f"(node_filesystem_avail_bytes < {d.full_bytes} "
            f"and node_filesystem_size_bytes > {d.full_bytes})",
        )
    return (
        "node_filesystem_avail_bytes / node_filesystem_size_bytes\n"
        "  and on(instance, mountpoint) (\n    " + "\n    or ".join(low) + "\n  )\n"
        "  and on(instance, mountpoint) node_filesystem_readonly == 0\n"
        "  and on(instance, mountpoint) trainwatch_path_info"
    )


def _space_rules(d: Defaults) -> list[Rule]:
    rules = []
    for severity in ("warning", "critical"):
        critical = severity == "critical"
        expr = _space(d, critical)
        if not critical:
            expr += "\n  unless on(instance, mountpoint) (\n" + _indent(_space(d, True)) + "\n  )"
        limit = (
            f"under {_pct(d.full_critical_fraction)}"
            if critical
            else f"under {_pct(d.full_fraction)} (or {fmt_bytes(d.full_bytes)} on a larger disk)"
        )
        rules.append(
            _rule(
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


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line for line in text.split("\n"))


def _filling(d: Defaults) -> list[Rule]:
    """disk-filling: core.fill's estimate, and core.fill.is_trend's "has lasted" in PromQL."""
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
        _rule(
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


def _rate(metric: str, window: str) -> str:
    return f"rate({metric}[{window}])"


def _devices(d: Defaults, window: str) -> list[Rule]:
    util = _rate("node_disk_io_time_seconds_total", window)
    waits = [
        f"{_rate(f'node_disk_{op}_time_seconds_total', window)} "
        f"/ {_rate(f'node_disk_{ops}_completed_total', window)} >= {d.saturated_await_ms / 1000:g}"
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
        _rule(
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
        _rule(
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


def _gpus(d: Defaults, window: str) -> list[Rule]:
    gpu = "on(instance, gpu, UUID)"
    util = "trainwatch_gpu_utilization_percent"
    span = f"{d.gpu_starved_window_s:g}s"
    busy_disk = (
        f"max by (instance) ({_rate('node_disk_io_time_seconds_total', window)} "
        "and on(instance, device) trainwatch_path_info)"
    )
    starved = (
        f"avg_over_time({util}[{span}]) < {d.gpu_starved_mean_util_pct:g}\n"
        f"  and {gpu} stddev_over_time({util}[{span}]) >= {d.gpu_starved_stdev_pct:g}\n"
        f"  and {gpu} count_over_time({util}[{span}]) >= 5\n"
        f"  unless {gpu} trainwatch_gpu_process_memory_bytes == 0\n"
        f"  and on(instance) {busy_disk} >= {d.disk_busy_util_pct / 100:g}"
    )
    return [
        _rule(
            "TrainwatchGpuStalled",
            "gpu-stalled",
            "warning",
            f"{util} < {d.gpu_idle_util_pct:g}\n"
            f"  and {gpu} trainwatch_gpu_process_memory_bytes > 0",
            "GPU {{ $labels.gpu }}",
            f"GPU {{{{ $labels.gpu }}}} on {ON} is stalled",
            f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.modelName }}}}) on {ON} has been under "
            f"{d.gpu_idle_util_pct:g} % for {fmt_duration(d.gpu_stalled_for_s)} while the "
            "training process holds memory on it: the loop is waiting on something.",
            "Find what the training loop waits on: `py-spy dump --pid <pid>` (or "
            "torch.profiler) shows it; the agent's own warning names storage when storage is "
            "the cause.",
            for_s=d.gpu_stalled_for_s,
        ),
        _rule(
            "TrainwatchGpuStarved",
            "gpu-starved",
            "warning",
            starved,
            "GPU {{ $labels.gpu }}",
            f"GPU {{{{ $labels.gpu }}}} on {ON} is starved of data",
            f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.modelName }}}}) on {ON} averaged under "
            f"{d.gpu_starved_mean_util_pct:g} % over the last "
            f"{fmt_duration(d.gpu_starved_window_s)}, swinging by "
            f"{d.gpu_starved_stdev_pct:g} points or more, while the data disk was over "
            f"{d.disk_busy_util_pct:g} % busy: the input pipeline cannot feed the GPU.",
            STARVED_FIX,
        ),
        _rule(
            "TrainwatchGpuUnavailable",
            "gpu-unavailable",
            "info",
            'trainwatch_warning{code="gpu-unavailable"} == 1',
            "gpu",
            f"No GPU metrics from {ON}",
            f"The agent on {ON} sees no GPU (no NVIDIA driver, no GPU, or no nvidia-ml-py); "
            "storage monitoring works as usual.",
            "Nothing to do on a CPU-only machine; else check that `nvidia-smi` works there.",
        ),
    ]


def alert_rules(defaults: Defaults = DEFAULTS, rate_window: str = "1m") -> list[Rule]:
    """Every rule, in the order of ARCHITECTURE.md's warning codes. ``rate_window`` is the
    range of ``rate()``: at least four scrape intervals (1m suits a 15 s scrape)."""
    if not WINDOW.match(rate_window):
        raise ValueError(f"a rate window is a duration like 30s, 1m or 5m; got {rate_window!r}")
    return [
        *_mounts(defaults),
        *_space_rules(defaults),
        *_filling(defaults),
        *_devices(defaults, rate_window),
        *_gpus(defaults, rate_window),
        *_gpu_health(defaults),
    ]


def _scalar(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _emit_rule(rule: Rule) -> Iterable[str]:
    yield f"      - alert: {rule['alert']}"
    yield "        expr: |-"
    for line in rule["expr"].split("\n"):
        yield f"          {line}"
    if "for" in rule:
        yield f"        for: {rule['for']}"
    for key in ("labels", "annotations"):
        yield f"        {key}:"
        for name, value in rule[key].items():
            yield f"          {name}: {_scalar(value)}"


def rules_yaml(defaults: Defaults = DEFAULTS, rate_window: str = "1m") -> str:
    """The rule file ``trainwatch-lab rules`` prints (``promtool check rules`` accepts it)."""
    from .. import __version__

    lines = [
        f"# Generated by `trainwatch-lab rules` (trainwatch_lab {__version__}): alerting rules",
        "# that mirror trainwatch's warnings, thresholds from its defaults. Labels: code,",
        "# severity, subject; annotations: summary, message, fix.",
        "groups:",
        "  - name: trainwatch",
        "    rules:",
    ]
    for rule in alert_rules(defaults, rate_window):
        lines.extend(_emit_rule(rule))
    return "\n".join(lines) + "\n"


# -- GPU health (issue 16): appended --------------------------------------------------------
THERMAL_REASONS = "sw_thermal|hw_thermal|hw_slowdown|hw_power_brake"
GPU_LABELS = "instance, job, gpu, UUID, modelName"


def _held(reasons: str, d: Defaults) -> str:
    """A GPU at least ``gpu_throttled_busy_pct`` busy with one of ``reasons`` holding."""
    return (
        f'max by ({GPU_LABELS}) (trainwatch_gpu_clock_event_reason{{reason=~"{reasons}"}})\n'
        f"  and on(instance, gpu, UUID) trainwatch_gpu_utilization_percent"
        f" >= {d.gpu_throttled_busy_pct:g}"
    )


def _gpu_health(d: Defaults) -> list[Rule]:
    """gpu-throttled (thermal/brake: warning; the power cap alone: info) and gpu-error."""
    lasted = fmt_duration(d.gpu_throttled_for_s)
    subject = "GPU {{ $labels.gpu }}"
    where = f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.modelName }}}}) on {ON}"
    return [
        _rule(
            "TrainwatchGpuThrottled",
            "gpu-throttled",
            "warning",
            _held(THERMAL_REASONS, d),
            subject,
            f"GPU {{{{ $labels.gpu }}}} on {ON} runs hot or power-braked",
            f"{where} has run with lowered clocks (thermal slowdown or the power brake) for "
            f"{lasted} while over {d.gpu_throttled_busy_pct:g} % busy: training runs slower "
            "than this GPU can.",
            "Cool the GPU: check its fans and the airflow through the chassis (`nvidia-smi -q "
            "-d TEMPERATURE,PERFORMANCE`), and ask the machine's owner when it is rented.",
            for_s=d.gpu_throttled_for_s,
        ),
        _rule(
            "TrainwatchGpuThrottled",
            "gpu-throttled",
            "info",
            f"({_held('sw_power_cap', d)})\n  unless on(instance, gpu, UUID) "
            f'trainwatch_gpu_clock_event_reason{{reason=~"{THERMAL_REASONS}"}}',
            subject,
            f"GPU {{{{ $labels.gpu }}}} on {ON} sits at its power limit",
            f"{where} has held its power cap for {lasted} while over "
            f"{d.gpu_throttled_busy_pct:g} % busy: clocks are lowered to stay within the limit.",
            "Check the limit against the default with `nvidia-smi -q -d POWER` (a lowered one "
            "can be raised with `nvidia-smi -pl`); at the default this is the GPU flat out.",
            for_s=d.gpu_throttled_for_s,
        ),
        _rule(
            "TrainwatchGpuError",
            "gpu-error",
            "critical",
            'trainwatch_warning{code="gpu-error"} == 1',
            "{{ $labels.subject }}",
            f"{{{{ $labels.subject }}}} on {ON} reported errors",
            f"The agent on {ON} saw XID errors or uncorrectable ECC errors on "
            "{{ $labels.subject }}: its results and the GPU itself cannot be trusted.",
            "Check `sudo dmesg | grep -i xid` and `nvidia-smi -q -d ECC,PAGE_RETIREMENT`; move "
            "the job to another GPU and tell the machine's owner when the XID is a hardware one.",
        ),
    ]
