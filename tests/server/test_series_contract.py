"""The series keys the panel builds from a live sample (js/src/series.ts ``flatten``) must be
keys that Python's History (core/history.py ``flatten``) also writes: the panel merges
``GET history`` (Python's keys) with the stream (its own), and a field spelled or chosen
differently would draw a line that stops at the first live sample."""

from __future__ import annotations

import re
from pathlib import Path

from trainwatch_lab.core.history import flatten
from trainwatch_lab.core.model import DiskRates, GpuState, PathState, Sample

SERIES_TS = Path(__file__).resolve().parents[2] / "js" / "src" / "series.ts"


def python_fields() -> set[tuple[str, str]]:
    """(kind, field) of every series a fully populated sample gives."""
    sample = Sample(
        t=1.0,
        disks={"sda": DiskRates("sda", 1, 2, 3, 4, 5, 6, 7, 8)},
        paths={
            "/d": PathState("/d", True, total_bytes=9, free_bytes=8, avail_bytes=7, inodes_free=6)
        },
        gpus=[
            GpuState(
                0,
                0,
                "u",
                "g",
                util_pct=1,
                mem_util_pct=2,
                mem_used_bytes=3,
                mem_total_bytes=4,
                power_w=5,
                temp_c=6,
                pcie_rx_bps=7,
                pcie_tx_bps=8,
                process_mem_bytes=9,
            )
        ],
    )
    return {(kind, fld) for (kind, _name, fld), _ in flatten(sample)}


def typescript_fields() -> set[tuple[str, str]]:
    """(kind, field) of every seriesKey(...) in series.ts's flatten, lists expanded."""
    source = SERIES_TS.read_text()
    body = source[source.index("export function flatten(") :]
    body = body[: body.index("\n}\n")]
    fields: set[tuple[str, str]] = set()
    for kind, fld in re.findall(r"seriesKey\('(\w+)',[^,]+,\s*'(\w+)'\)", body):
        fields.add((kind, fld))
    for listed, kind in re.findall(
        r"for \(const f of \[([^\]]+)\][^{]*\{\s*put\(seriesKey\('(\w+)'", body
    ):
        fields.update((kind, f) for f in re.findall(r"'(\w+)'", listed))
    return fields


def test_the_panel_flattens_only_keys_python_writes() -> None:
    ts = typescript_fields()
    assert len(ts) >= 8, ts  # the parser still finds the lists (a test that can fail)
    assert ts <= python_fields(), sorted(ts - python_fields())
