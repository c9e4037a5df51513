"""prometheus.metrics: a Sample as Prometheus metrics, node_exporter's names as it sends them."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus.conftest import http_get
from trainwatch_lab.core.model import (
    Alert,
    CheckpointInfo,
    FillState,
    GpuState,
    PathState,
    ProbeResult,
    ProcessIO,
    Sample,
)
from trainwatch_lab.core.storage.diskstats import DiskStatsSource, parse_diskstats
from trainwatch_lab.monitor import make_sampler
from trainwatch_lab.prometheus.metrics import SampleCollector, exposition, families
from trainwatch_lab.prometheus.names import BY_NAME, SPECS, metrics_table

DATA = Path(__file__).resolve().parents[1] / "core" / "data"


def parse(text: bytes | str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Exposition text -> {sample name: [(labels, value)]}."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    raw = text.decode() if isinstance(text, bytes) else text
    for family in text_string_to_metric_families(raw):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def a_sample() -> Sample:
    fill = FillState("/mnt/share", "filling", rate_bps=1e6, seconds_to_full=500.0, trend_s=40.0)
    fill.points = 12
    share = PathState(
        path="/mnt/share/runs",
        exists=True,
        mountpoint="/mnt/share",
        fstype="nfs4",
        source="server:/export",
        kind="shared",
        shared=True,
        total_bytes=10_000,
        free_bytes=600,
        avail_bytes=500,
        inodes_total=100,
        inodes_free=50,
        probe=ProbeResult(p50_ms=12.5, p99_ms=40.0, samples=16),
        checkpoints=CheckpointInfo(3, "/mnt/share/runs/last.ckpt", 4096, 1.7e9, 60.0),
        fill=fill,
    )
    same_fs = PathState(
        path="/mnt/share/data",
        exists=True,
        mountpoint="/mnt/share",
        fstype="nfs4",
        source="server:/export",
        kind="shared",
        shared=True,
        total_bytes=10_000,
        avail_bytes=500,
        fill=fill,
    )
    dead = PathState(path="/mnt/dead", mountpoint="/mnt/dead", fstype="fuse.sshfs", kind="shared")
    dead.responsive = False
    return Sample(
        t=1.7e9,
        paths={p.path: p for p in (share, same_fs, dead)},
        gpus=[
            GpuState(
                0,
                0,
                "GPU-aaaa",
                "NVIDIA H200",
                util_pct=3.0,
                mem_used_bytes=2**30,
                process_mem_bytes=2**29,
                clock_reasons=["gpu_idle"],
            ),
            GpuState(1, 1, "GPU-bbbb", "NVIDIA H200", util_pct=None),
        ],
        process=ProcessIO(
            pid=42, pids=3, read_chars_s=1.0, write_chars_s=2.0, read_bytes_s=3.0, write_bytes_s=4.0
        ),
        warnings=[
            Alert("shared-mount", "warning", "/mnt/share/runs", "m", "f"),
            Alert("mount-unresponsive", "critical", "/mnt/dead", "m", "f"),
        ],
    )


def test_a_sample_becomes_node_exporter_and_trainwatch_series() -> None:
    counters = parse_diskstats((DATA / "diskstats_real_after.txt").read_text())
    got = parse(exposition(a_sample(), {"vda": counters["vda"]}))
    vda = counters["vda"]
    assert got["node_disk_read_bytes_total"] == [({"device": "vda"}, vda.rd_sectors * 512)]
    assert got["node_disk_io_time_seconds_total"] == [({"device": "vda"}, vda.io_ticks / 1000)]
    assert got["node_disk_write_time_seconds_total"][0][1] == pytest.approx(vda.wr_ticks / 1000)
    fs = {"device": "server:/export", "mountpoint": "/mnt/share", "fstype": "nfs4"}
    # one series per filesystem, though two watched paths live on it
    assert got["node_filesystem_avail_bytes"] == [(fs, 500.0)]
    assert got["node_filesystem_files_free"] == [(fs, 50.0)]
    assert got["trainwatch_filesystem_seconds_to_full"] == [(fs, 500.0)]
    assert got["trainwatch_filesystem_fill_points"] == [(fs, 12.0)]
    # a mount that did not answer: the error flag and nothing else, as node_exporter does
    dead = {"device": "", "mountpoint": "/mnt/dead", "fstype": "fuse.sshfs"}
    assert (dead, 1.0) in got["node_filesystem_device_error"]
    assert all(labels != dead for labels, _ in got["node_filesystem_size_bytes"])
    verdicts = {labels["path"]: labels["verdict"] for labels, _ in got["trainwatch_path_info"]}
    assert verdicts == {
        "/mnt/share/runs": "shared",
        "/mnt/share/data": "shared",
        "/mnt/dead": "unresponsive",
    }
    assert got["trainwatch_probe_p50_seconds"] == [({"path": "/mnt/share/runs"}, 0.0125)]
    assert got["trainwatch_checkpoint_newest_bytes"] == [({"path": "/mnt/share/runs"}, 4096.0)]
    assert sorted(labels["code"] for labels, _ in got["trainwatch_warning"]) == [
        "mount-unresponsive",
        "shared-mount",
    ]
    gpu0 = {"gpu": "0", "UUID": "GPU-aaaa", "modelName": "NVIDIA H200"}
    assert got["trainwatch_gpu_utilization_percent"] == [(gpu0, 3.0)]  # GPU 1: unknown, no NaN
    assert got["trainwatch_gpu_process_memory_bytes"] == [(gpu0, 2.0**29)]
    assert got["trainwatch_gpu_clock_event_reason"] == [({**gpu0, "reason": "gpu_idle"}, 1.0)]
    assert got["trainwatch_process_write_bytes_per_second"] == [({"pid": "42"}, 4.0)]
    assert got["trainwatch_sample_timestamp_seconds"] == [({}, 1.7e9)]


def test_gpu_selection_and_process_switch() -> None:
    names = {f.name for f in families(a_sample(), gpus=[1], process=False)}
    assert "trainwatch_gpu_utilization_percent" not in names  # GPU 1 reports nothing
    assert not any(n.startswith("trainwatch_process_") for n in names)
    assert families(None) == []  # no sample yet: nothing, not an error
    # serve --gpu GPU-aaaa: by UUID (a unique prefix) as by index
    by_uuid = {f.name: f for f in families(a_sample(), gpus=["GPU-aaa"], process=False)}
    util = by_uuid["trainwatch_gpu_utilization_percent"].samples
    assert [s.labels["UUID"] for s in util] == ["GPU-aaaa"]  # dcgm-exporter's label names


def test_every_series_is_documented_with_its_type_and_labels() -> None:
    text = exposition(a_sample(), parse_diskstats((DATA / "diskstats_real_after.txt").read_text()))
    for family in text_string_to_metric_families(text.decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        spec = BY_NAME[name]
        assert family.type == spec.kind
        for s in family.samples:
            assert set(s.labels) == set(spec.labels), name
    table = metrics_table()
    assert all(f"`{spec.name}`" in table for spec in SPECS)
    assert len({spec.name for spec in SPECS}) == len(SPECS)


def test_disk_source_keeps_the_latest_counters_for_a_scrape(tmp_path: Path) -> None:
    """A scrape reads counters from memory: from the first reading on, for the devices the
    source reports (whole disks and watched ones; loop devices left out)."""
    stats = tmp_path / "diskstats"
    stats.write_text((DATA / "diskstats_real_before.txt").read_text())
    sys_root = tmp_path / "sys"
    (sys_root / "block" / "vda").mkdir(parents=True)
    source = DiskStatsSource(proc_path=str(stats), sys_root=str(sys_root))
    assert source.counters() == {}
    source.collect(Sample(t=0.0))
    first = source.counters()
    assert list(first) == ["vda"]
    stats.write_text((DATA / "diskstats_real_after.txt").read_text())
    sample = Sample(t=1.0)
    source.collect(sample)
    assert source.counters()["vda"].rd_ios >= first["vda"].rd_ios
    assert list(sample.disks) == ["vda"]
    source.close()


def test_a_real_sampler_tick_exposes_and_matches_node_exporter(
    node_exporter: str, tmp_path: Path
) -> None:
    """Against Debian's node_exporter on this machine: the same HELP, TYPE and label names
    for every node_* metric we send, and the same filesystem numbers for a quiet one."""
    sampler = make_sampler(["/"], probe=False, gpu=False)
    try:
        sampler.tick()
        sample = sampler.tick()
        source = sampler.find_source("disks")
        collector = SampleCollector(lambda: sample, source.counters)
        ours = list(collector.collect())
    finally:
        sampler.close()
    status, theirs_text = http_get(node_exporter)
    assert status == 200
    theirs = {f.name: f for f in text_string_to_metric_families(theirs_text)}
    node_families = [f for f in ours if f.name.startswith("node_")]
    assert {f.name for f in node_families} >= {"node_disk_read_bytes", "node_filesystem_size_bytes"}
    for family in node_families:
        other = theirs[family.name]
        assert (family.type, family.documentation) == (other.type, other.documentation)
        ours_labels = {frozenset(s.labels) for s in family.samples}
        assert ours_labels <= {frozenset(s.labels) for s in other.samples}, family.name
    size = next(f for f in ours if f.name == "node_filesystem_size_bytes").samples[0]
    same = [s for s in theirs["node_filesystem_size_bytes"].samples if s.labels == size.labels]
    assert same and same[0].value == size.value


def test_the_readme_documents_every_metric_as_the_code_exports_it() -> None:
    """The metric table in README.md is metrics_table()'s output: docs that cannot drift."""
    from pathlib import Path

    from trainwatch_lab.prometheus.names import metrics_table

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert metrics_table().strip() in readme
