"""disk-saturated (advice.devices), firing and not firing, on constructed Samples and History."""

from __future__ import annotations

from dataclasses import replace

from tests.advice.test_storage import T0, state
from trainwatch_lab.advice.context import Context
from trainwatch_lab.advice.devices import disk_saturated
from trainwatch_lab.advice.storage import STORAGE_DETECTORS
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, DiskRates, Sample


def disk_history(rows: list[tuple[float, float, float]], device: str = "sda"):
    """rows of (util, r_await, w_await), one per second; the watched path is on ``device``."""
    history = History(capacity=1000)
    sample = None
    for i, (util, r_await, w_await) in enumerate(rows):
        rates = DiskRates(device, 200, 50, 80.0, 5.0, r_await, w_await, 6.5, util)
        sample = Sample(t=T0 + i, disks={device: rates}, paths={"/data/run": state(device=device)})
        history.append(sample)
    assert sample is not None
    return history, sample


def saturated(history: History, sample: Sample, defaults=DEFAULTS) -> list[Alert]:
    return list(disk_saturated(Context(sample, history, defaults, None)))


def test_disk_saturated_after_the_hold_time() -> None:
    history, sample = disk_history([(10, 1, 1)] * 5 + [(95, 25, 3)] * 12)
    (alert,) = saturated(history, sample)
    assert alert.subject == "sda" and alert.code == "disk-saturated"
    assert "95 %" in alert.message and "25.0 ms" in alert.message and "/data/run" in alert.message
    assert "12 s" in alert.message
    # DiskRates counts MiB/s (80 and 5 here); the message says decimal MB/s, as every surface
    assert "reading 83.9 MB/s and writing 5.24 MB/s" in alert.message


def test_disk_saturated_not_before_hold_time_nor_without_wait() -> None:
    history, sample = disk_history([(10, 1, 1)] * 5 + [(95, 25, 3)] * 8)
    assert saturated(history, sample) == []
    assert len(saturated(history, sample, replace(DEFAULTS, saturated_for_s=5))) == 1
    # busy but fast (an NVMe at 100 % util with 0.3 ms waits is not a bottleneck)
    history, sample = disk_history([(100, 0.3, 0.2)] * 20)
    assert saturated(history, sample) == []


def test_disk_saturated_streak_must_be_unbroken() -> None:
    rows = [(95, 25, 3)] * 8 + [(40, 2, 2)] + [(95, 25, 3)] * 8
    history, sample = disk_history(rows)
    assert saturated(history, sample) == []
    history, sample = disk_history([(95, 25, 3)] * 20 + [(40, 2, 2)])
    assert saturated(history, sample) == []


def test_disk_saturated_one_alert_per_device() -> None:
    history, sample = disk_history([(95, 25, 3)] * 15)
    sample.paths["/data/other"] = state("/data/other", device="sda")
    (alert,) = saturated(history, sample)
    assert "/data/other" in alert.message and "/data/run" in alert.message


def test_the_storage_rules_still_list_disk_saturated_in_its_place() -> None:
    """Moving the rule out of storage.py changed no rule list (precision tests, registry)."""
    names = [d.__name__ for d in STORAGE_DETECTORS]
    assert names.index("disk_saturated") == names.index("checkpoint_wont_fit") - 1
