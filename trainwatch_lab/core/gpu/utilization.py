"""GPU utilization over the whole tick, from NVML's utilization sample buffer.

Why: ``nvmlDeviceGetUtilizationRates`` covers only the driver's last sample period (1/6 s to
1 s by product), so a loop busy 200 ms of every second reads 0 % or 100 % depending on when the
tick lands. ``nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES)`` returns every sample newer
than a timestamp; their mean over the tick is what the GPU did since the last one (~20 % for
that loop). When the buffer has nothing new (ticks faster than the driver samples) or the board
does not support it, the caller keeps the UtilizationRates reading.
"""

from __future__ import annotations

import time
from typing import Any

UTILIZATION_SAMPLES = 1  # NVML_GPU_UTILIZATION_SAMPLES (nvml.h nvmlSamplingType_t)
NOT_FOUND = 6  # NVML_ERROR_NOT_FOUND: no sample newer than the timestamp
FIRST_WINDOW_US = 1_000_000  # the first read looks back one default tick, not the whole ring

# nvmlValueType_t -> the c_nvmlValue_t union member that holds it
_VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def sample_value(value_type: int, sample: Any) -> float:
    """One sample's value as a float, whichever union member NVML filled."""
    name = _VALUE_FIELDS[value_type] if 0 <= value_type < len(_VALUE_FIELDS) else "uiVal"
    return float(getattr(sample.sampleValue, name))


def mean_since(nvml: Any, handle: Any, since_us: int | None) -> tuple[float | None, int | None]:
    """(mean utilization %, newest sample timestamp) of the samples after ``since_us`` (the
    newest one seen last time; ``None`` on the first read). ``(None, since_us)`` when there is
    nothing new; other NVML errors propagate to the caller's handler."""
    if since_us is None:
        since_us = max(0, int(time.time() * 1e6) - FIRST_WINDOW_US)
    try:
        value_type, samples = nvml.nvmlDeviceGetSamples(handle, UTILIZATION_SAMPLES, since_us)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == NOT_FOUND:
            return None, since_us
        raise
    fresh = [s for s in samples if s.timeStamp > since_us]
    if not fresh:
        return None, since_us
    values = [sample_value(int(value_type), s) for s in fresh]
    return sum(values) / len(values), max(s.timeStamp for s in fresh)
