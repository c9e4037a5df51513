"""advice.headline: the words the dashboard, the panel and the status bar open with."""

from __future__ import annotations

from trainwatch_lab.advice.advisor import Advisor
from trainwatch_lab.advice.headline import headline
from trainwatch_lab.core.defaults import GIB
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, DiskRates, GpuState, PathState, Sample


def sample(warnings: list[Alert] | None = None, gpus: list[GpuState] | None = None) -> Sample:
    paths = {
        "/data/run": PathState(
            "/data/run",
            True,
            "/data",
            device="sda",
            total_bytes=100 * GIB,
            avail_bytes=40 * GIB,
            free_bytes=40 * GIB,
        ),
        "/scratch": PathState(
            "/scratch",
            True,
            "/scratch",
            device="nvme0n1",
            total_bytes=10 * GIB,
            avail_bytes=GIB,
            free_bytes=GIB,
        ),
    }
    disks = {
        "sda": DiskRates("sda", 10, 10, 1.0, 2.0, 1, 1, 0.1, 20.0),
        "nvme0n1": DiskRates("nvme0n1", 90, 90, 40.0, 3.0, 1, 1, 0.5, 62.0),
        "sdz": DiskRates("sdz", 900, 900, 900.0, 900.0, 1, 1, 9, 99.0),  # not watched
    }
    return Sample(t=0.0, paths=paths, disks=disks, gpus=gpus or [], warnings=warnings or [])


def alert(code: str, severity: str) -> Alert:
    return Alert(code, severity, "/data/run", "m", "f")  # type: ignore[arg-type]


def test_all_clear_with_the_facts_that_matter() -> None:
    h = headline(sample(gpus=[GpuState(0, 0, "u", "H200", util_pct=86.6)]))
    assert h.level == "ok" and h.verdict == "Storage OK"
    # the busiest watched disk (not the unwatched sdz), the least free space by share
    assert h.facts == ["GPU 87 %", "nvme0n1 45.1 MB/s, 62 % busy", "1 GiB (10 %) free on /scratch"]
    assert (
        h.text
        == "Storage OK · GPU 87 % · nvme0n1 45.1 MB/s, 62 % busy · 1 GiB (10 %) free on /scratch"
    )
    assert h.brief == "GPU 87 % · disk 45.1 MB/s"


def test_the_worst_severity_and_count_and_notes_kept_apart() -> None:
    warnings = [
        alert("disk-filling", "critical"),
        alert("shared-mount", "warning"),
        alert("gpu-unavailable", "info"),
    ]
    h = headline(sample(warnings))
    assert (h.level, h.verdict, h.notes) == ("critical", "2 warnings (1 critical)", 1)
    assert h.brief.endswith("⚠ 2")
    only_note = headline(sample([alert("gpu-unavailable", "info")]))
    assert (only_note.level, only_note.verdict, only_note.notes) == ("ok", "Storage OK", 1)


def test_the_advisor_sets_it_on_every_sample_it_judges() -> None:
    s = sample()
    history = History(capacity=4)
    history.append(s)
    s.warnings = Advisor(detectors=[lambda ctx: [alert("slow-mount", "warning")]]).evaluate(
        s, history
    )
    assert s.headline is not None and s.headline.verdict == "1 warning"
    assert s.to_json()["headline"]["text"].startswith("1 warning · ")


def test_rates_are_always_in_mb_per_s() -> None:
    """One unit family everywhere (issue 11): not kB/s in the status bar and MB/s beside it."""
    s = sample()
    s.disks["nvme0n1"] = DiskRates("nvme0n1", 1, 1, 0.5, 0.0, 1, 1, 0.1, 2.0)  # MiB/s
    s.disks["sda"] = DiskRates("sda", 1, 1, 0.0, 0.0, 1, 1, 0.1, 1.0)
    h = headline(s)
    assert "nvme0n1 0.52 MB/s, 2 % busy" in h.facts and h.brief == "disk 0.52 MB/s"
