"""core.model: the one strict-JSON helper every surface uses."""

from __future__ import annotations

import json
import math

from trainwatch_lab.core.model import ProbeResult, Sample, json_safe


def test_json_safe_turns_non_finite_floats_into_null_at_any_depth() -> None:
    raw = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": "x", "e": None}}
    assert json_safe(raw) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": "x", "e": None}}
    sample = Sample(t=1.0)
    sample.notes["x"] = "y"
    data = sample.to_json()
    assert json_safe(data) == data  # finite data passes unchanged
    assert json.dumps(json_safe(ProbeResult(math.nan, 1.0, 2).to_json()), allow_nan=False) == (
        '{"p50_ms": null, "p99_ms": 1.0, "samples": 2}'
    )
