"""advice.check: verdicts, the exact JSON shape, exit codes, and a real one-shot check."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from tests.support.contract import CHECK_PATH_KEYS
from trainwatch_lab.advice.check import CheckReport, run_check, verdict_for
from trainwatch_lab.core.defaults import GIB
from trainwatch_lab.core.guard.guard import MountGuard
from trainwatch_lab.core.model import Alert, PathState, ProbeResult


def alert(code: str, subject: str, severity: str = "warning") -> Alert:
    return Alert(code, severity, subject, "m 1", "f")  # type: ignore[arg-type]


def state(path: str = "/d", **kw: object) -> PathState:
    return PathState(path=path, exists=True, **kw)  # type: ignore[arg-type]


def test_verdicts_worst_first() -> None:
    assert verdict_for(state(), []) == "ok"
    assert verdict_for(state(shared=True), []) == "shared"
    assert verdict_for(state(shared=True), [alert("slow-mount", "/d")]) == "slow"
    assert verdict_for(state(shared=True), [alert("slow-mount", "/other")]) == "shared"
    assert verdict_for(PathState(path="/d", exists=False), []) == "missing"
    # not created yet: judged by the nearest existing ancestor's filesystem
    later = PathState(path="/d/new", exists=False, checked_at="/d", shared=True)
    assert verdict_for(later, []) == "shared"
    assert verdict_for(replace(later, shared=False), []) == "ok"
    assert verdict_for(replace(later, responsive=False), []) == "unresponsive"
    assert verdict_for(state(kind="pseudo"), []) == "not-storage"
    assert verdict_for(state(file_type="FIFO"), []) == "not-storage"
    assert verdict_for(state(file_type="block device"), []) == "not-storage"
    assert verdict_for(state(file_type="file"), []) == "ok"  # a log file
    assert verdict_for(state(responsive=False, shared=True), []) == "unresponsive"
    assert verdict_for(state(), [alert("mount-unresponsive", "/d", "critical")]) == "unresponsive"


def test_report_json_shape_and_exit_code() -> None:
    s = state(
        "/mnt/x",
        mountpoint="/mnt/x",
        fstype="nfs4",
        source="srv:/e",
        shared=True,
        total_bytes=10 * GIB,
        free_bytes=GIB,
        avail_bytes=GIB,
        probe=ProbeResult(30.0, 50.0, 16),
    )
    report = CheckReport(states=[s], alerts=[alert("shared-mount", "/mnt/x")])
    data = report.to_json()
    assert list(data) == ["paths", "warnings"]
    assert list(data["paths"][0]) == CHECK_PATH_KEYS
    assert data["paths"][0]["probe"] == {"p50_ms": 30.0, "p99_ms": 50.0, "samples": 16}
    assert data["paths"][0]["verdict"] == "shared"
    assert data["warnings"] == [
        {
            "code": "shared-mount",
            "severity": "warning",
            "subject": "/mnt/x",
            "message": "m 1",
            "fix": "f",
        }
    ]
    assert report.exit_code == 1
    assert CheckReport(states=[state()], alerts=[alert("x", "/d", "info")]).exit_code == 0
    assert CheckReport(states=[state()], alerts=[]).exit_code == 0


def test_run_check_real_local_directory(tmp_path: Path) -> None:
    report = run_check([str(tmp_path), str(tmp_path) + "/"], timeout=5)
    (s,) = report.states  # the same path twice is checked once
    assert s.path == str(tmp_path) and s.exists and s.responsive
    assert s.mountpoint and s.fstype and s.total_bytes and s.avail_bytes is not None
    assert s.probe is not None and s.probe.samples > 0
    assert report.verdicts in (["ok"], ["slow"], ["shared"])
    assert list(tmp_path.iterdir()) == []


def test_run_check_path_not_created_yet_is_judged_by_its_nearest_ancestor(
    tmp_path: Path,
) -> None:
    later = str(tmp_path / "a" / "b")
    report = run_check([later, str(tmp_path)], probe=False)
    gone, parent = report.states
    assert report.verdicts == ["ok", "ok"] and report.missing == []
    assert gone.mountpoint == parent.mountpoint and gone.total_bytes == parent.total_bytes
    entry = report.to_json()["paths"][0]
    assert entry["checked_at"] == str(tmp_path)
    assert entry["note"] == f"not created yet; checked at {tmp_path}"
    assert report.to_json()["paths"][1]["note"] is None
    assert not os.path.exists(later)


def test_run_check_probes_a_new_logdir_where_it_will_be_created(tmp_path: Path) -> None:
    report = run_check([str(tmp_path / "runs" / "exp1")], timeout=5)
    (s,) = report.states
    assert s.probe is not None and s.probe.samples > 0 and s.probe.error is None
    assert report.verdicts in (["ok"], ["slow"])
    assert os.listdir(tmp_path) == []  # the probe file removed, nothing created


def test_run_check_devices_fifos_and_kernel_filesystems_are_not_storage(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    dev_mtime = os.stat("/dev").st_mtime_ns
    paths = ["/dev/null", str(fifo), "/proc/self", "/sys/kernel", "/dev"]
    report = run_check(paths, timeout=5)
    assert report.verdicts == ["not-storage"] * 5, [s.note for s in report.states]
    assert all(s.probe is None and s.note for s in report.states)
    assert report.exit_code == 0 and report.missing == []
    assert os.stat("/dev").st_mtime_ns == dev_mtime  # no probe file created in /dev
    assert os.listdir(tmp_path) == ["pipe"]


def test_run_check_expands_user() -> None:
    report = run_check(["~"], probe=False)
    assert report.states[0].path == os.path.expanduser("~")


def test_a_path_that_could_not_be_inspected_is_never_ok() -> None:
    assert verdict_for(PathState(path="/d", error="Too many levels of symbolic links"), []) == (
        "missing"
    )
    assert verdict_for(PathState(path="/d", responsive=False, error="no helper"), []) == (
        "unresponsive"
    )


def test_run_check_paths_that_cannot_exist_are_missing(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    (tmp_path / "file").write_text("x")
    paths = [str(loop), str(tmp_path / ("n" * 300)), str(tmp_path / "file" / "x")]
    report = run_check(paths, probe=False, timeout=5)
    assert report.verdicts == ["missing"] * 3
    assert all(s.error for s in report.states)
    assert report.missing == paths


def test_run_check_without_an_answer_in_time_is_unresponsive(tmp_path: Path) -> None:
    # fresh, and helpers even for a local path: its helper cannot be ready within a millisecond
    with MountGuard(inline=False) as guard:
        report = run_check([str(tmp_path)], probe=False, timeout=0.001, guard=guard)
    assert report.verdicts == ["unresponsive"]
    assert [a.code for a in report.alerts] == ["mount-unresponsive"]
    assert report.exit_code == 1
