"""GPU health rules: ``gpu-throttled`` and ``gpu-error``.

``gpu-throttled``: thermal or power clock-event reasons held for ``gpu_throttled_for_s`` while
the GPU is busy (``gpu_throttled_busy_pct``): an idle GPU that lowers its clocks is no news.
Thermal reasons and the hardware power brake are a warning (the cooling or the power supply
cannot keep up); the software power cap alone is info, because a GPU at full load on a default
limit reaches it by design. State is kept across ticks so the whole run is measured.

``gpu-error``: XID errors the driver reported (through NVML's event set) within
``gpu_error_keep_s``, or volatile uncorrectable ECC errors above ``gpu_ecc_uncorrected_max``:
critical, the run's results or the GPU itself cannot be trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ...core.model import Alert
from ..context import Context
from ..text import fmt_duration

THERMAL = ("sw_thermal", "hw_thermal", "hw_slowdown")
POWER = ("hw_power_brake", "sw_power_cap")
_THROTTLE = "gpu-throttled"
_ERRORS = "gpu-error"

# XIDs worth a word (NVIDIA's XID catalogue); others are reported by number only
XID_MEANING = {
    13: "graphics engine exception (often the application's own out-of-range access)",
    31: "GPU memory page fault (often the application's own bug)",
    43: "the GPU stopped processing (a user application faulted)",
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapper failure",
    74: "NVLink error",
    79: "the GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


@dataclass
class _Held:
    since: float
    reasons: set[str] = field(default_factory=set)


def gpu_throttled(ctx: Context) -> Iterator[Alert]:
    d, sample = ctx.defaults, ctx.sample
    held: dict[str, _Held] = ctx.state.setdefault(_THROTTLE, {})
    for gpu in sample.gpus:
        reasons = {r for r in gpu.clock_reasons if r in THERMAL or r in POWER}
        busy = gpu.util_pct is not None and gpu.util_pct >= d.gpu_throttled_busy_pct
        if gpu.lost or not reasons or not busy:
            held.pop(gpu.uuid, None)
            continue
        track = held.setdefault(gpu.uuid, _Held(since=sample.t))
        track.reasons |= reasons
        lasted = sample.t - track.since
        if lasted < d.gpu_throttled_for_s:
            continue
        thermal = [r for r in THERMAL if r in track.reasons]
        severe = bool(thermal) or "hw_power_brake" in track.reasons
        facts = [f"{gpu.util_pct:.0f} % busy"]
        if gpu.temp_c is not None:
            facts.append(f"{gpu.temp_c:.0f} °C")
        if gpu.power_w is not None and gpu.power_limit_w:
            facts.append(f"{gpu.power_w:.0f} W of a {gpu.power_limit_w:.0f} W limit")
        why = ", ".join(sorted(track.reasons))
        yield Alert(
            code="gpu-throttled",
            severity="warning" if severe else "info",
            subject=f"GPU {gpu.index}",
            message=(
                f"GPU {gpu.index} has run with lowered clocks ({why}) for "
                f"{fmt_duration(lasted)} while busy ({', '.join(facts)}): training runs slower "
                "than this GPU can."
            ),
            fix=_throttle_fix(thermal, track.reasons),
        )


def _throttle_fix(thermal: list[str], reasons: set[str]) -> str:
    if thermal:
        return (
            "Cool the GPU: check its fans and the airflow through the chassis (`nvidia-smi -q -d "
            "TEMPERATURE,PERFORMANCE`), and ask the machine's owner when it is a rented server."
        )
    if "hw_power_brake" in reasons:
        return (
            "The power supply asserted the brake: ask the machine's owner to check the PSU and "
            "the power cabling (`nvidia-smi -q -d PERFORMANCE`)."
        )
    return (
        "The GPU sits at its power limit. Check it against the default with `nvidia-smi -q -d "
        "POWER` (a lowered limit can be raised with `nvidia-smi -pl`, as root); at the default "
        "limit this is the GPU working flat out."
    )


def gpu_error(ctx: Context) -> Iterator[Alert]:
    d, sample = ctx.defaults, ctx.sample
    seen: dict[str, list[tuple[float, int]]] = ctx.state.setdefault(_ERRORS, {})
    for gpu in sample.gpus:
        events = seen.setdefault(gpu.uuid, [])
        events.extend((sample.t, xid) for xid in gpu.xid_errors)
        events[:] = [(t, x) for t, x in events if sample.t - t <= d.gpu_error_keep_s]
        ecc = gpu.ecc_uncorrected
        ecc_bad = ecc is not None and ecc > d.gpu_ecc_uncorrected_max
        if not events and not ecc_bad:
            continue
        parts = []
        if events:
            xids = sorted({x for _, x in events})
            named = "; ".join(
                f"XID {x}: {XID_MEANING[x]}" if x in XID_MEANING else f"XID {x}" for x in xids
            )
            ago = fmt_duration(sample.t - events[-1][0])
            parts.append(
                f"the driver reported {len(events)} XID error(s) ({named}), last {ago} ago"
            )
        if ecc_bad:
            parts.append(f"{ecc} uncorrectable ECC error(s) since the driver loaded")
        yield Alert(
            code="gpu-error",
            severity="critical",
            subject=f"GPU {gpu.index}",
            message=f"GPU {gpu.index} ({gpu.name}): {'; '.join(parts)}.",
            fix=(
                "Save what you can and check `sudo dmesg | grep -i xid` and `nvidia-smi -q -d "
                "ECC,PAGE_RETIREMENT`: an application XID (13, 31, 43) means a bug in the job; a "
                "hardware one (48, 63-64, 79, 92-95, 119-120) or uncorrectable ECC errors mean "
                "this GPU needs a reset or a replacement - move the job to another GPU and tell "
                "the machine's owner."
            ),
        )


GPU_HEALTH_DETECTORS = [gpu_throttled, gpu_error]
