"""The ``trainwatch-lab`` command through real subprocesses: JSON shape, exit codes, bad input."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.contract import (
    CHECK_PATH_KEYS,
    PROBE_EVIDENCE_KEYS,
    PROBE_KEYS,
    VERDICTS,
    WARNING_KEYS,
)
from trainwatch_lab.cli import PROG, build_parser

ROOT = Path(__file__).resolve().parents[1]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), e.get("PYTHONPATH")) if p)
    return e


def tw(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "COMMAND"),
        (("check",), "PATH"),
        (("check", "--timeout", "0", "/"), "--timeout"),
        (("check", "--timeout", "soon", "/"), "must be a number of seconds or a duration"),
        (("watch", "--interval", "-1", "/"), "--interval"),
        (("watch", "--interval", "nan", "/"), "must be a number of seconds"),
        (("watch", "--duration", "0", "/"), "--duration"),
        (("watch", "--interval", "0.001", "/"), "at least"),
        (("check", "--frobnicate", "/"), "--frobnicate"),
        (("launch", "/"), "launch"),
        (("check", ""), "empty path"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    out = tw(*args)
    assert out.returncode == 2, out
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("trainwatch-lab: error: ")
    assert needle in lines[0]
    assert out.stdout == ""


def test_help_exits_0() -> None:
    out = tw("check", "--help")
    assert out.returncode == 0
    assert "--no-probe" in out.stdout and "--timeout" in out.stdout


def _commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """The top-level parser and each subcommand's, from the real build_parser()."""
    parser = build_parser()
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {(): parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update({(name,): sub for name, sub in action.choices.items()})
    return found


@pytest.mark.parametrize("command", [(), ("check",), ("watch",)])
def test_help_lists_each_option_with_its_default_and_an_example(command: tuple[str, ...]) -> None:
    """``--help`` is where users look: every option says its default, one with a value gives
    an example value, and the epilog's examples use every option (and every command)."""
    out = tw(*command, "--help")
    assert out.returncode == 0 and out.stderr == ""
    flat = " ".join(out.stdout.split())  # argparse wraps help at the terminal's width
    examples = out.stdout.split("\nexamples:\n", 1)[1]
    assert f"{PROG} {' '.join(command)}".strip() in examples
    parser = _commands()[command]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name in action.choices:
                assert f"{PROG} {name} " in examples
            continue
        assert action.help and " ".join(action.help.split()) in flat
        assert "(default: " in action.help or "(required; e.g. " in action.help, action.help
        if action.option_strings and action.nargs != 0:  # takes a value: an example value
            assert f"e.g. {action.option_strings[0]} " in action.help
        for option in action.option_strings:
            assert option in examples, option


def check_shape(report: dict) -> None:
    assert set(report) == {"paths", "warnings"}
    for entry in report["paths"]:
        assert list(entry) == CHECK_PATH_KEYS
        assert entry["verdict"] in VERDICTS
        if entry["probe"] is not None:
            keys = list(entry["probe"])
            assert keys[:3] == PROBE_KEYS and set(keys[3:]) <= set(PROBE_EVIDENCE_KEYS)
    for warning in report["warnings"]:
        assert set(warning) == set(WARNING_KEYS)
        assert warning["severity"] in {"info", "warning", "critical"}


def test_check_json_on_local_disk(tmp_path: Path) -> None:
    out = tw("check", "--json", str(tmp_path))
    report = json.loads(out.stdout)
    check_shape(report)
    (entry,) = report["paths"]
    assert entry["path"] == str(tmp_path)
    assert entry["total_bytes"] > 0 and entry["free_bytes"] > 0
    assert entry["probe"]["samples"] > 0 and entry["probe"]["p50_ms"] > 0
    serious = [w for w in report["warnings"] if w["severity"] != "info"]
    assert out.returncode == (1 if serious else 0)
    assert list(tmp_path.iterdir()) == []  # the probe cleaned up after itself


def test_check_no_probe_writes_nothing(tmp_path: Path) -> None:
    out = tw("check", "--json", "--no-probe", str(tmp_path))
    (entry,) = json.loads(out.stdout)["paths"]
    assert entry["probe"] is None
    assert list(tmp_path.iterdir()) == []


def test_check_a_logdir_not_created_yet_is_judged_where_it_will_be(tmp_path: Path) -> None:
    """Before the run, the moment a user asks: the filesystem it will be created on, with a
    note; exit by the warnings (2 is for bad usage only)."""
    later = tmp_path / "not" / "yet"
    out = tw("check", "--json", "--no-probe", str(later), str(tmp_path))
    report = json.loads(out.stdout)
    check_shape(report)
    first, second = report["paths"]
    assert first["path"] == str(later) and first["verdict"] == second["verdict"]
    assert first["verdict"] in ("ok", "shared")
    assert first["mountpoint"] == second["mountpoint"]  # resolved through its ancestor
    assert first["fstype"] == second["fstype"] and first["total_bytes"]
    assert first["checked_at"] == str(tmp_path) and second["checked_at"] == str(tmp_path)
    assert first["note"] == f"not created yet; checked at {tmp_path}" and second["note"] is None
    serious = [w for w in report["warnings"] if w["severity"] != "info"]
    assert out.returncode == (1 if serious else 0) and out.stderr == ""
    human = tw("check", str(later))
    assert human.returncode in (0, 1) and human.stderr == ""
    assert f"{later}: not created yet; checked at {tmp_path}\n" in human.stdout
    assert not later.exists() and list(tmp_path.iterdir()) == []  # probed, then removed


def test_check_devices_fifos_and_kernel_filesystems_get_a_plain_verdict(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    dev_mtime = os.stat("/dev").st_mtime_ns
    paths = ["/dev/null", str(fifo), "/proc/self", "/sys/kernel", "/dev"]
    out = tw("check", "--json", *paths)
    assert out.returncode == 0, out
    report = json.loads(out.stdout)
    check_shape(report)
    assert [e["verdict"] for e in report["paths"]] == ["not-storage"] * 5
    assert all(e["probe"] is None for e in report["paths"])
    notes = {e["path"]: e["note"] for e in report["paths"]}
    assert notes["/dev/null"].startswith("a character device on devtmpfs")
    assert notes[str(fifo)] == "a FIFO: not storage, nothing written"
    assert notes["/proc/self"].startswith("a directory on proc (a kernel pseudo-filesystem)")
    human = tw("check", *paths)
    rows = human.stdout.split("\n\n")[0].splitlines()[1:]
    assert [r.split()[-1] for r in rows[: len(paths)]] == ["not-storage"] * 5
    assert "/sys/kernel: a directory on sysfs (a kernel pseudo-filesystem): not storage" in (
        human.stdout
    )
    assert os.stat("/dev").st_mtime_ns == dev_mtime  # no probe file created in /dev
    assert os.listdir(tmp_path) == ["pipe"]


def test_watch_refuses_what_is_not_storage(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for bad, needle in ((fifo, "a FIFO"), (Path("/dev/null"), "a character device")):
        out = tw("watch", "--duration", "30", str(bad))
        assert out.returncode == 2, out
        (line,) = out.stderr.splitlines()
        assert line == f"trainwatch-lab: error: {bad} is not storage: {needle}" + (
            " on devtmpfs (a kernel pseudo-filesystem)" if "device" in needle else ""
        )


def test_check_human_table(tmp_path: Path) -> None:
    out = tw("check", "--no-probe", str(tmp_path), "~")
    assert out.returncode in (0, 1), out.stderr
    header, *rows = out.stdout.split("\n\n")[0].splitlines()
    assert header.split()[:3] == ["PATH", "FS", "TYPE"]
    assert [r.split()[0] for r in rows] == [str(tmp_path), os.path.expanduser("~")]
    assert "No warnings." in out.stdout or "Warnings:" in out.stdout


def test_watch_json_lines(tmp_path: Path) -> None:
    out = tw("watch", "--json", "--interval", "0.3", "--duration", "2", str(tmp_path))
    assert out.returncode in (0, 1), out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) >= 3
    for line in lines:
        assert {"t", "disks", "paths", "gpus", "warnings"} <= set(line)
        assert str(tmp_path) in line["paths"]
    times = [line["t"] for line in lines]
    assert times == sorted(times) and times[-1] - times[0] >= 0.9
    device = lines[-1]["paths"][str(tmp_path)]["device"]
    if device:  # a block device under the path: iostat columns by the last sample
        assert set(lines[-1]["disks"][device]) >= {"r_s", "w_s", "util", "aqu_sz"}


def test_watch_human_output(tmp_path: Path) -> None:
    out = tw("watch", "--interval", "0.3", "--duration", "1.5", str(tmp_path))
    assert out.returncode in (0, 1), out.stderr
    assert out.stdout.count("FILL RATE") >= 3
    assert str(tmp_path) in out.stdout


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_watch_stops_cleanly_on_ctrl_c_and_sigterm(tmp_path: Path, signum: int, code: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainwatch_lab", "watch", "--interval", "0.2", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        seen = 0
        while seen < 4 and time.monotonic() < deadline:  # a few ticks, the probe under way
            if "FILL RATE" in proc.stdout.readline():
                seen += 1
        assert seen == 4
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    time.sleep(0.5)  # a helper that got SIGTERM removes its file on its way out
    assert list(tmp_path.iterdir()) == []


def test_check_a_path_that_cannot_exist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    out = tw("check", "--json", "--no-probe", str(loop))
    assert out.returncode == 2, out
    assert json.loads(out.stdout)["paths"][0]["verdict"] == "missing"
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainwatch-lab: error: ")
    assert str(loop) in lines[0] and "symbolic links" in lines[0]


def test_watch_refuses_a_path_that_can_never_exist(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for bad, needle in (
        (tmp_path / "file" / "x", "not a directory"),
        (loop, "symbolic links"),
        (tmp_path / ("n" * 300), "too long"),
    ):
        out = tw("watch", "--duration", "30", str(bad))
        assert out.returncode == 2, out
        lines = out.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("trainwatch-lab: error: "), out.stderr
        assert needle in lines[0] and out.stdout == ""


def test_watch_accepts_a_logdir_about_to_be_created(tmp_path: Path) -> None:
    out = tw("watch", "--json", "--interval", "0.5", "--duration", "1.5", str(tmp_path / "run1"))
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout.splitlines()[0])["paths"]
    assert not (tmp_path / "run1").exists()


def test_cli_paths_use_the_one_normalise() -> None:
    from trainwatch_lab.cli.common import user_paths
    from trainwatch_lab.core.paths.names import normalise
    from trainwatch_lab.server.hub import path_key

    raw = ["~/a/../b/", "rel/./x", "/tmp//y/"]
    assert user_paths(raw) == [normalise(p) for p in raw] == [path_key(p) for p in raw]


# a training run in another terminal: its event file open for writing, a record per step
TRAINING_RUN = (
    "import os, sys, time\n"
    "f = open(os.path.join(sys.argv[1], 'events.out.tfevents.1700000000.host'), 'ab')\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    f.write(b'x' * 64); f.flush(); time.sleep(0.1)\n"
)


@pytest.mark.slow  # a training-like process found by a real `watch`, ~10 s
def test_watch_without_paths_finds_the_training_run_and_its_logdir(tmp_path: Path) -> None:
    """Issue 14, item 4: no path (or --processes) finds what trains here by itself."""
    logdir = tmp_path / "runs" / "exp1"
    logdir.mkdir(parents=True)
    run = subprocess.Popen(
        [sys.executable, "-c", TRAINING_RUN, str(logdir)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert run.stdout is not None and run.stdout.readline().strip() == "ready"
        out = tw("watch", "--json", "--interval", "0.5", "--duration", "6")
        assert out.returncode in (0, 1), out.stderr
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        last = lines[-1]
        (row,) = [p for p in last["processes"] if p["pid"] == run.pid]
        assert row["reasons"] == ["event file"] and str(logdir) in row["paths"]
        assert last["paths"][str(logdir)]["labels"] == [
            f"pid {run.pid} `{row['command']}`, event file"
        ]
        human = tw("watch", "--processes", "--interval", "0.5", "--duration", "4", str(tmp_path))
        assert human.returncode in (0, 1), human.stderr
        assert f"  pid {run.pid} python" in human.stdout and str(logdir) in human.stdout
    finally:
        run.kill()
        run.wait()


def test_watch_table_shows_decimal_mb_per_s() -> None:
    """DiskRates carries MiB/s (as ``iostat -m``); the table's rMB/s and wMB/s are decimal
    MB/s like the panel, the charts and the headline: 1 MiB/s reads 1.05, 100 MiB/s 104.86."""
    from io import StringIO

    from trainwatch_lab.cli.watch_output import print_disks
    from trainwatch_lab.core.model import DiskRates, PathState, Sample

    rates = DiskRates("sda", 1.0, 2.0, 1.0, 100.0, 0.5, 0.5, 0.1, 5.0)
    sample = Sample(t=0.0, disks={"sda": rates}, paths={"/data": PathState("/data", device="sda")})
    out = StringIO()
    print_disks(sample, out)
    header, row = (line.split() for line in out.getvalue().splitlines())
    assert header[3:5] == ["rMB/s", "wMB/s"]
    assert row[:5] == ["sda", "1.0", "2.0", "1.05", "104.86"]


def test_watch_says_a_process_writes_in_mb_per_s_even_a_trickle() -> None:
    """README: rates in MB/s everywhere in the CLI but a warning's sentence (issue 36 item 3:
    a process line said "writes 147 kB/s" under a table in MB/s)."""
    from io import StringIO

    from trainwatch_lab.cli.watch_output import print_processes
    from trainwatch_lab.core.model import ProcessIO, Sample, TrainingProcess

    io = ProcessIO(pid=7, pids=1, read_chars_s=0, write_chars_s=147_000, read_bytes_s=0,
                   write_bytes_s=0)  # fmt: skip
    run = TrainingProcess(pid=7, command="python train.py", cwd="/w", reasons=["event file"], io=io)
    out = StringIO()
    print_processes(Sample(t=0.0, processes=[run]), out)
    assert out.getvalue() == "  pid 7 python train.py: event file; writes 0.15 MB/s\n"


# -- issue 23 item 11 ----------------------------------------------------------------


def test_check_never_compares_the_home_disk_with_itself(tmp_path: Path) -> None:
    """VS LOCAL read 0.1x, 1.6x, <0.1x across runs for a path on the very disk the local
    reference is measured on: that is no comparison (ARCHITECTURE's slow-mount rule)."""
    out = tw("check", str(tmp_path))
    assert out.returncode in (0, 1), out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split()[-3:] == ["VS", "LOCAL", "VERDICT"]
    assert row.split()[-2:] == ["-", "ok"], row
    assert "not compared with paths on that disk" in out.stdout


def test_watch_takes_a_duration_as_the_magic_does(tmp_path: Path) -> None:
    out = tw("watch", "--json", "--interval", "0.5", "--duration", "2s", str(tmp_path))
    assert out.returncode in (0, 1), out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()]
    bad = tw("watch", "--duration", "2x", str(tmp_path))
    assert bad.returncode == 2 and "like 500ms, 30s, 10m, 1h" in bad.stderr


def test_check_a_path_under_a_regular_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`check /etc/hostname/x` printed a local row of its ancestor's filesystem and "No
    warnings." before its error, and exited 2."""
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "x"
    out = tw("check", "--no-probe", str(bad))
    assert out.returncode == 2 and out.stdout == "", out
    (line,) = out.stderr.splitlines()
    assert line.startswith("trainwatch-lab: error: ") and "not a directory" in line
    both = tw("check", "--no-probe", str(bad), str(tmp_path))
    assert both.returncode == 2
    row = next(r for r in both.stdout.splitlines() if r.startswith(str(bad)))
    assert row.split()[1:] == ["-"] * 5 + ["missing"], row
    assert "No warnings for the other paths." in both.stdout


@pytest.mark.parametrize(
    ("command", "typo", "meant"),
    [("check", "--jsn", "--json"), ("watch", "--intervall", "--interval")],
)
def test_an_unknown_option_names_the_closest_one_as_the_magic_does(
    tmp_path: Path, command: str, typo: str, meant: str
) -> None:
    out = tw(command, typo, str(tmp_path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"trainwatch-lab: error: unknown option {typo!r}, did you mean {meant}?\n"
