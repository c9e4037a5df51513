"""gpu-throttled and gpu-error over a real History and Advisor: when they fire, when not."""

from __future__ import annotations

from trainwatch_lab.advice.advisor import Advisor
from trainwatch_lab.advice.gpu.health import gpu_error, gpu_throttled
from trainwatch_lab.advice.registry import all_detectors
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, GpuState, Sample


def sample(t: float, util: float, reasons=(), xids=(), ecc: int | None = 0) -> Sample:
    g = GpuState(
        0,
        0,
        "GPU-x",
        "H100",
        util_pct=util,
        temp_c=91.0,
        power_w=690.0,
        power_limit_w=700.0,
        clock_reasons=list(reasons),
        xid_errors=list(xids),
        ecc_uncorrected=ecc,
    )
    return Sample(t=t, gpus=[g])


def run(samples: list[Sample], detector) -> list[list[Alert]]:
    history = History(capacity=900)
    advisor = Advisor([detector], defaults=DEFAULTS)
    out = []
    for s in samples:
        history.append(s)
        out.append(advisor.evaluate(s, history))
    return out


def test_both_rules_are_registered() -> None:
    assert {gpu_throttled, gpu_error} <= set(all_detectors())


def test_thermal_throttle_held_while_busy_is_a_warning_after_a_minute() -> None:
    out = run([sample(t, 95, ["hw_thermal"]) for t in range(0, 91)], gpu_throttled)
    assert out[59] == []  # held for 59 s: not yet
    (alert,) = out[90]
    assert (alert.code, alert.severity, alert.subject) == ("gpu-throttled", "warning", "GPU 0")
    assert "hw_thermal" in alert.message and "1 min 30 s" in alert.message
    assert "91 °C" in alert.message and "fans" in alert.fix


def test_power_cap_alone_is_info_idle_or_broken_runs_are_nothing() -> None:
    (alert,) = run([sample(t, 95, ["sw_power_cap"]) for t in range(0, 61)], gpu_throttled)[-1]
    assert alert.severity == "info" and "nvidia-smi -pl" in alert.fix
    idle = [sample(t, 3, ["hw_thermal", "gpu_idle"]) for t in range(0, 120)]
    assert run(idle, gpu_throttled)[-1] == []
    # a cool moment in the middle starts the count again
    gap = [sample(t, 95, [] if t == 40 else ["hw_thermal"]) for t in range(0, 91)]
    assert run(gap, gpu_throttled)[-1] == []


def test_xid_is_critical_kept_for_a_while_then_dropped() -> None:
    samples = [sample(t, 50, xids=[79] if t == 5 else []) for t in range(0, 700, 5)]
    out = run(samples, gpu_error)
    assert out[0] == []
    (alert,) = out[1]
    assert (alert.code, alert.severity) == ("gpu-error", "critical")
    assert "XID 79: the GPU has fallen off the bus" in alert.message
    assert out[100] and "last 8 min 15 s ago" in out[100][0].message
    assert out[-1] == []  # older than gpu_error_keep_s


def test_uncorrectable_ecc_count_fires_unsupported_ecc_does_not() -> None:
    (alert,) = run([sample(1, 50, ecc=2)], gpu_error)[0]
    assert "2 uncorrectable ECC error(s)" in alert.message
    assert run([sample(1, 50, ecc=None), sample(2, 50, ecc=0)], gpu_error) == [[], []]
