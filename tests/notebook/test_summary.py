"""The %%trainwatch summary and the no-widget renderings, from a History of known samples."""

from __future__ import annotations

from trainwatch_lab.core.defaults import MIB
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    Alert,
    DiskRates,
    GpuState,
    PathState,
    ProcessIO,
    Sample,
)
from trainwatch_lab.notebook.summary import (
    alerts_bundle,
    snapshot_html,
    snapshot_text,
    summarize_cell,
)

T0 = 1_700_000_000.0
PATH = "/data/<run> & co"  # hostile characters must be escaped in HTML


def sample(i: int, wmb: float, util: float, used_mib: int, gpu_util: float) -> Sample:
    return Sample(
        t=T0 + i,
        disks={"sda": DiskRates("sda", 10, 20, 1.0, wmb, 0.5, 4.0 + i, 1.0, 50)},
        paths={
            PATH: PathState(
                path=PATH,
                exists=True,
                mountpoint="/data",
                fstype="ext4",
                device="sda",
                kind="local",
                total_bytes=1000 * MIB,
                free_bytes=(1000 - used_mib) * MIB,
                avail_bytes=(900 - used_mib) * MIB,
            )
        },
        gpus=[GpuState(index=0, nvml_index=0, uuid="u", name="G", util_pct=gpu_util)],
        process=ProcessIO(
            pid=7,
            pids=1,
            read_chars_s=0,
            write_chars_s=wmb * MIB,
            read_bytes_s=0,
            write_bytes_s=wmb * MIB,
        ),
    )


def history() -> History:
    h = History(capacity=100)
    # t=0 is before the cell (baseline); the cell runs from t=0.5 to t=4
    for i, (wmb, used, gpu) in enumerate(
        [(0, 100, 90), (10, 110, 0), (30, 140, 0), (10, 150, 80), (0, 150, 100)]
    ):
        h.append(sample(i, wmb, 50, used, gpu))
    return h


def test_cell_summary_numbers() -> None:
    warn = Alert("disk-filling", "warning", PATH, "filling", "free space")
    s = summarize_cell(history(), T0 + 0.5, T0 + 4, [PATH], [warn, warn], gpu_indices=None)
    assert s.samples == 4
    (dev,) = s.devices
    assert dev.device == "sda"
    assert dev.peak_write_bps == 30 * MIB
    assert dev.peak_await_ms == 8.0
    assert dev.written_bytes == 50 * MIB  # 10 + 30 + 10 + 0 MiB over 1 s steps
    (p,) = s.paths
    assert p.used_growth_bytes == 50 * MIB and p.filesystem == "/data"
    (g,) = s.gpus
    assert g.mean_util_pct == 45.0  # 0, 0, 80, 100
    assert g.idle_s == 2.0  # two 1 s intervals under 5 %
    assert s.process_write_bytes == 50 * MIB
    assert [a.code for a in s.warnings] == ["disk-filling"]  # one per condition
    text = s.to_text()
    assert "peak write 31.5 MB/s" in text and "space used on /data +50 MiB" in text
    assert "GPU 0: mean util 45 %, idle 2 s" in text
    html = s.to_html()
    assert "&lt;run&gt; &amp; co" in html and "<run>" not in html


def test_gpu_filter_and_empty_cell() -> None:
    s = summarize_cell(history(), T0 + 0.5, T0 + 4, [PATH], [], gpu_indices=[1], gpu_note="x")
    assert s.gpus == [] and "GPU: x" in s.to_text()
    empty = summarize_cell(History(capacity=4), T0, T0 + 0.1, [], [])
    assert empty.samples == 0 and "ended before the first sample" in empty.to_text()


def test_snapshots_and_alert_bundle_are_readable_without_widgets() -> None:
    h = history()
    latest = h.latest
    latest.warnings = [Alert("shared-mount", "warning", PATH, "on <nfs>", "copy later")]
    text = snapshot_text(latest, h)
    assert text.startswith("trainwatch at") and PATH in text and "disk sda" in text
    html = snapshot_html(latest, h)
    assert "&lt;nfs&gt;" in html and "var(--jp-warn-color1)" in html
    assert "#" not in html.split("<style>")[0]  # no hard-coded colours outside CSS vars
    bundle = alerts_bundle(latest.warnings)
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.trainwatch.alert+json"}
    assert "Fix: copy later" in bundle["text/plain"]
    assert snapshot_text(None).endswith("waiting for the first sample")
