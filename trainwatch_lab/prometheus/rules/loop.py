"""The training-loop rules: io-bound and input-cpu-bound, from the agent's verdict.

Both need what only the agent measures (where the loop's main thread and its DataLoader
workers sleep, on which files, from /proc), and none of it is exported as a number: the
rules read the agent's ``trainwatch_warning`` and word it for the fleet (see
prometheus.rules.ruleset)."""

from __future__ import annotations

from ...advice.text import fmt_duration, fmt_pct
from ...core.defaults import Defaults
from .base import ON, Rule, rule

IO_FIX = (
    "Find the call in the agent's own warning (`trainwatch-lab watch --pid PID`): fsync and "
    "writes of logs or checkpoints: write them to local disk and copy them to the share in "
    "the background (`local_mirror`, `trainwatch-lab mirror`, `save_checkpoint(..., "
    "background=True)`); reads of data: a faster or local disk, more DataLoader workers, a "
    "cache in RAM."
)


def _io_bound(d: Defaults, severity: str, share: float) -> Rule:
    window = fmt_duration(d.io_bound_window_s)
    return rule(
        "TrainwatchIoBound",
        "io-bound",
        severity,
        f'trainwatch_warning{{code="io-bound", severity="{severity}"}} == 1',
        "{{ $labels.subject }}",
        f"The training loop on {ON} waits on {{{{ $labels.subject }}}}",
        f"The training loop on {ON} spent at least {fmt_pct(share)} of the last {window} "
        "waiting on files under {{ $labels.subject }}: that much of the run goes to storage.",
        IO_FIX,
    )


def loop_rules(d: Defaults) -> list[Rule]:
    return [
        _io_bound(d, "warning", d.io_bound_high),
        _io_bound(d, "info", d.io_bound_moderate),
        rule(
            "TrainwatchInputCpuBound",
            "input-cpu-bound",
            "info",
            'trainwatch_warning{code="input-cpu-bound"} == 1',
            "{{ $labels.subject }}",
            f"The input pipeline on {ON} is CPU-bound",
            f"{{{{ $labels.subject }}}} on {ON} is underused while the training loop waits on "
            "its data loaders, and they hardly wait on storage: they are short of CPU.",
            "Give the loader more CPU: DataLoader(num_workers=more, persistent_workers=True), "
            "cheaper decoding or augmentation (on the GPU, or done once ahead of training).",
        ),
    ]
