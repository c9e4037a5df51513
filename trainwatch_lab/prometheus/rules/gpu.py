"""The GPU alerting rules: gpu-stalled, gpu-starved, gpu-unavailable, gpu-throttled and
gpu-error, thresholds from core.defaults (see prometheus.rules.ruleset)."""

from __future__ import annotations

from ...advice.text import fmt_duration
from ...core.defaults import Defaults
from .base import ON, Rule, rate, rule

STARVED_FIX = (
    "Feed the GPU from faster storage: copy the dataset to local NVMe (or RAM) before "
    "training, read it in larger shards (WebDataset, TFRecord, Arrow), and use "
    "DataLoader(num_workers=4 or more, pin_memory=True, prefetch_factor=4, "
    "persistent_workers=True); keep logs and checkpoints off the data disk."
)
THERMAL_REASONS = "sw_thermal|hw_thermal|hw_slowdown|hw_power_brake"

GPU_LABELS = "instance, job, gpu, UUID, modelName"


GPU = "on(instance, gpu, UUID)"
UTIL = "trainwatch_gpu_utilization_percent"


def starved_expr(d: Defaults, window: str) -> str:
    """Low, erratic utilization with memory held, the data disk busy, and the agent's own
    gpu-starved: what only it sees (the job's share of the device's reads, the read await,
    the loaders asleep on file reads; advice.gpu.feed), since a busy disk alone is no proof."""
    span = f"{d.gpu_starved_window_s:g}s"
    busy_disk = (
        f"max by (instance) ({rate('node_disk_io_time_seconds_total', window)} "
        "and on(instance, device) trainwatch_path_info)"
    )
    return (
        f"avg_over_time({UTIL}[{span}]) < {d.gpu_starved_mean_util_pct:g}\n"
        f"  and {GPU} stddev_over_time({UTIL}[{span}]) >= {d.gpu_starved_stdev_pct:g}\n"
        f"  and {GPU} count_over_time({UTIL}[{span}]) >= 5\n"
        f"  unless {GPU} trainwatch_gpu_process_memory_bytes == 0\n"
        f"  and on(instance) {busy_disk} >= {d.disk_busy_util_pct / 100:g}\n"
        f'  and on(instance) count by (instance) (trainwatch_warning{{code="gpu-starved"}}) > 0'
    )


def gpu_rules(d: Defaults, window: str) -> list[Rule]:
    gpu, util = GPU, UTIL
    starved = starved_expr(d, window)
    return [
        rule(
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
        rule(
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
            f"{d.disk_busy_util_pct:g} % busy, and the agent saw the job's own reads waiting "
            "on it: the input pipeline cannot feed the GPU.",
            STARVED_FIX,
        ),
        rule(
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


def held(reasons: str, d: Defaults) -> str:
    """A GPU at least ``gpu_throttled_busy_pct`` busy with one of ``reasons`` holding."""
    return (
        f'max by ({GPU_LABELS}) (trainwatch_gpu_clock_event_reason{{reason=~"{reasons}"}})\n'
        f"  and on(instance, gpu, UUID) trainwatch_gpu_utilization_percent"
        f" >= {d.gpu_throttled_busy_pct:g}"
    )


def gpu_health_rules(d: Defaults) -> list[Rule]:
    """gpu-throttled (thermal/brake: warning; the power cap alone: info) and gpu-error."""
    lasted = fmt_duration(d.gpu_throttled_for_s)
    subject = "GPU {{ $labels.gpu }}"
    where = f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.modelName }}}}) on {ON}"
    return [
        rule(
            "TrainwatchGpuThrottled",
            "gpu-throttled",
            "warning",
            held(THERMAL_REASONS, d),
            subject,
            f"GPU {{{{ $labels.gpu }}}} on {ON} runs hot or power-braked",
            f"{where} has run with lowered clocks (thermal slowdown or the power brake) for "
            f"{lasted} while over {d.gpu_throttled_busy_pct:g} % busy: training runs slower "
            "than this GPU can.",
            "Cool the GPU: check its fans and the airflow through the chassis (`nvidia-smi -q "
            "-d TEMPERATURE,PERFORMANCE`), and ask the machine's owner when it is rented.",
            for_s=d.gpu_throttled_for_s,
        ),
        rule(
            "TrainwatchGpuThrottled",
            "gpu-throttled",
            "info",
            f"({held('sw_power_cap', d)})\n  unless on(instance, gpu, UUID) "
            f'trainwatch_gpu_clock_event_reason{{reason=~"{THERMAL_REASONS}"}}',
            subject,
            f"GPU {{{{ $labels.gpu }}}} on {ON} sits at its power limit",
            f"{where} has held its power cap for {lasted} while over "
            f"{d.gpu_throttled_busy_pct:g} % busy: clocks are lowered to stay within the limit.",
            "Check the limit against the default with `nvidia-smi -q -d POWER` (a lowered one "
            "can be raised with `nvidia-smi -pl`); at the default this is the GPU flat out.",
            for_s=d.gpu_throttled_for_s,
        ),
        rule(
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
