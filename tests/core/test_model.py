"""core.model: the one strict-JSON helper every surface uses."""

from __future__ import annotations

import json
import math
import time

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


def test_a_sample_read_back_from_its_json_writes_the_same_json(tmp_path) -> None:
    """What an attached kernel reads (core.attach) is the sample the server judged: a real
    sampler's tick with paths, a probe and its reference, disks, warnings and a headline."""
    from trainwatch_lab.core.model import dumps, sample_from_json
    from trainwatch_lab.monitor import make_sampler

    (tmp_path / "ckpt-1.pt").write_bytes(b"x" * 1024)
    sampler = make_sampler([str(tmp_path), str(tmp_path / "new")], pid=None, process=False)
    try:
        sample = None
        for _ in range(100):  # until the first probe landed
            sample = sampler.tick()
            if sample.paths[str(tmp_path)].probe is not None:
                break
            time.sleep(0.05)
    finally:
        sampler.close()
    assert sample is not None and sample.headline is not None
    text = dumps(sample.to_json())
    again = sample_from_json(json.loads(text))
    assert dumps(again.to_json()) == text
    assert again.paths[str(tmp_path)].checkpoints is not None
    assert again.paths[str(tmp_path)].probe.p50_ms == sample.paths[str(tmp_path)].probe.p50_ms


def test_a_newer_servers_fields_are_left_out_not_fatal() -> None:
    from trainwatch_lab.core.model import sample_from_json

    data = Sample(t=1.0).to_json()
    data["from_the_future"] = {"x": 1}
    data["warnings"] = [
        {"code": "c", "severity": "info", "subject": "s", "message": "m", "fix": "f", "new": 1}
    ]
    again = sample_from_json(data)
    assert again.t == 1.0 and again.warnings[0].code == "c"


def test_the_fast_asdict_gives_what_dataclasses_asdict_gives_and_copies() -> None:
    """model.asdict replaced dataclasses.asdict in every to_json (issue 33: it was the
    largest part of the server's tick): same dicts, nested values copied, not shared."""
    import collections
    import dataclasses

    from trainwatch_lab.core import model

    point = collections.namedtuple("point", "x y")
    reference = ProbeResult(p50_ms=0.4, p99_ms=1.5, samples=3, where="/", device="sda")
    probe = ProbeResult(p50_ms=9.0, p99_ms=math.nan, samples=5, slow_runs=2, reference=reference)
    state = model.PathState(
        path="/data",
        exists=True,
        disks=["sda", "sdb"],
        total_bytes=10,
        free_bytes=4,
        avail_bytes=3,
        probe=probe,
        checkpoints=model.CheckpointInfo(2, "/data/c", 7, 1.5, None),
        fill=model.FillState("/", "filling", rate_bps=2.0),
        labels=["pid 1 `x`"],
        quota={"kind": "user", "nested": {"ids": [1, 2], "pair": (3, point(1, 2))}},
    )
    mine = model.asdict(state)
    assert mine == dataclasses.asdict(state)
    assert type(mine["quota"]["nested"]["pair"][1]) is point  # a namedtuple stays one
    mine["disks"].append("sdc")
    mine["quota"]["nested"]["ids"].append(3)
    assert state.disks == ["sda", "sdb"] and state.quota["nested"]["ids"] == [1, 2]
    # the to_json built on it: asdict's dict with the derived figures over it
    expected = dataclasses.asdict(state)
    expected.update(probe=probe.to_json(), checkpoints=state.checkpoints.to_json())
    expected.update(used_bytes=6, reserved_bytes=1, used_pct=state.used_fraction * 100.0)
    assert json.dumps(state.to_json()) == json.dumps(expected)
    proc = model.TrainingProcess(pid=1, command="x", cwd=None, reasons=["gpu"], paths={"/d": ["a"]})
    assert proc.to_json() == {**dataclasses.asdict(proc), "io": None}
    assert model.Headline("ok", "Storage OK", ["a"]).to_json() == dataclasses.asdict(
        model.Headline("ok", "Storage OK", ["a"])
    )
