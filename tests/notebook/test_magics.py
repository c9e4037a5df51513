"""``%trainwatch`` / ``%%trainwatch`` through a real IPython shell; bad input for every option."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from tests.core.fake_nvml import FakeNvml, fake_nvml, fake_nvml_lib
from tests.notebook.dashboard.test_traffic import views
from trainwatch_lab.notebook.magics import state_for
from trainwatch_lab.notebook.options import help_text, parse_options

from .conftest import sampler_threads, wait_for

__all__ = ["fake_nvml", "fake_nvml_lib"]  # fixtures


def live(shell: Any) -> Any:
    return state_for(shell).dashboard


# -- parsing (options.py; more in test_options.py) --------------------------------------


def test_a_path_under_a_regular_file_cannot_exist(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    for line in (f"{blocker}/runs", f"--logdir {blocker}/a/b", f"{tmp_path} {blocker}/x"):
        with pytest.raises(UsageError, match=f"cannot exist: {blocker} is a file"):
            parse_options(line)
    # a directory that does not exist yet is fine: training will create it
    assert parse_options(f"{tmp_path}/not/yet").paths == [f"{tmp_path}/not/yet"]


def test_bad_input_changes_nothing(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    before = live(shell)
    wait_for(lambda: before.samples >= 1, what="first sample")
    blocker = tmp_path / "f"
    blocker.write_text("x")
    lines = ("--bogus", "--intervall 5", "--interval 0", "--interval -1", "--window 3")
    for line in (*lines, "--gpu x", f"{blocker}/x", "stop now", "status --interval 1"):
        with pytest.raises(UsageError):
            shell.run_line_magic("trainwatch", line)
    for line, cell in (("stop", "x = 1"), ("--interval -1", "x = 1"), ("", "if x:\nx = 1")):
        with capture_output():
            result = shell.run_cell(f"%%trainwatch {line}\n{cell}")
        assert isinstance(result.error_in_exec, UsageError), (line, cell)
    with capture_output() as cap:  # asking for help is no error, and changes nothing either
        for line in ("--help", "-h", "status --help", f"{tmp_path / 'other'} --help"):
            shell.run_line_magic("trainwatch", line)
        assert shell.run_cell("%%trainwatch --help\nx = 1").success
    assert cap.stdout.count("Options:") == 5
    assert "x" not in shell.user_ns  # no cell body ran
    assert live(shell) is before
    assert before.sampler.running and not before.stopped
    assert before.paths() == [str(tmp_path)]
    assert len(sampler_threads()) == 1


def test_status_and_stop_take_no_options(shell: Any) -> None:
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("trainwatch", "status --interval 1")
    assert str(err.value) == "trainwatch: status takes no options, got '--interval 1'"
    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("trainwatch", "stop", "x = 1")
    assert str(err.value).startswith("trainwatch: stop is a line magic: run %trainwatch stop")


# -- help where users look --------------------------------------------------------------


def test_help_is_printed_plain_text(shell: Any, capsys: pytest.CaptureFixture) -> None:
    """``--help``/``-h`` print the help (no UsageError), the same text as ``%trainwatch?``,
    every option with its default and an example."""
    for line in ("--help", "-h"):
        assert shell.run_line_magic("trainwatch", line) is None
        assert capsys.readouterr().out == help_text()
    text = help_text()
    for flag in ("--logdir PATH", "--interval S", "--window SPAN", "--gpu 0,1|none", "--no-probe"):
        assert f"\n  {flag}  " in text
    assert "default: 1s" in text and "default: 10m" in text and "default: all GPUs" in text
    assert "example: %trainwatch runs --interval 0.5" in text
    assert "%trainwatch status" in text and "%trainwatch stop" in text
    assert live(shell) is None  # and nothing started


def test_cell_help_prints_help_and_runs_nothing(shell: Any) -> None:
    with capture_output() as cap:
        result = shell.run_cell("%%trainwatch --help\nran = True")
    assert result.success
    assert cap.stdout == help_text() + "trainwatch: the cell was not run (--help)\n"
    assert "ran" not in shell.user_ns
    assert live(shell) is None and sampler_threads() == []


def test_question_mark_shows_the_help(shell: Any) -> None:
    """``%trainwatch?``: IPython shows the magic's docstring, which is the help text."""
    with capture_output() as cap:
        shell.run_cell("%trainwatch?")
    shown = strip_ansi(cap.stdout)
    assert "Docstring:" in shown
    for line in help_text().splitlines():
        assert line in shown


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# -- the live dashboard -----------------------------------------------------------------


def test_dashboard_state_updates_from_the_sampler_thread(shell: Any, tmp_path: Path) -> None:
    with capture_output() as cap:
        shell.run_line_magic("trainwatch", f"--logdir {tmp_path} --interval 0.2 --window 1m")
    dash = live(shell)
    # frontends without widgets see a readable snapshot, not a widget repr
    bundle = cap.outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("trainwatch")
    assert "text/html" in bundle

    data = tmp_path / "blob.bin"
    with open(data, "wb") as fh:  # real I/O on the watched disk while the sampler runs
        for _ in range(8):
            fh.write(os.urandom(1 << 20))
            fh.flush()
            os.fsync(fh.fileno())
    wait_for(lambda: dash.points >= 3, what="three chart points")

    sample = dash.sampler.latest
    state = sample.paths[str(tmp_path)]
    assert f'data-path="{tmp_path}"' in dash.paths_pane.value
    assert f'data-kind="{state.kind}"' in dash.paths_pane.value
    io = dash.charts["io"]
    device = state.device or sorted(sample.disks)[0]
    assert f"{device} write" in io.lines.labels
    with dash._lock:  # one moment: the sampler thread redraws between two plain reads
        assert len(io.lines.x) == dash.points
    assert f'data-points="{dash.points}"' in dash.status.value or dash.samples > 0
    if sample.gpus:
        assert dash.grid.children[0] is dash.charts["gpu"].figure
        assert dash.gpu_note.value == ""
    else:  # no GPU: a plain note instead of an empty chart
        assert dash.charts["gpu"].figure not in dash.grid.children
        assert "GPU:" in dash.gpu_note.value
    assert "tw-warn-line" in dash.alerts_pane.html or "no warnings" in dash.alerts_pane.html


def test_running_twice_replaces_the_sampler(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    first = live(shell)
    wait_for(lambda: first.samples >= 1, what="first sample")
    other = tmp_path / "other"
    shell.run_line_magic("trainwatch", f"{other} --interval 0.2 --no-probe")
    second = live(shell)
    assert second is not first
    assert first.stopped and not first.sampler.running
    assert 'data-state="replaced by a newer %trainwatch"' in first.status.value
    assert second.paths() == [str(other)]
    wait_for(lambda: second.samples >= 1, what="first sample of the new sampler")
    assert len(sampler_threads()) == 1


def test_status_and_stop(shell: Any, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shell.run_line_magic("trainwatch", "status")
    assert "not running" in capsys.readouterr().out
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    dash = live(shell)
    wait_for(lambda: dash.samples >= 2, what="two samples")
    shell.run_line_magic("trainwatch", "status")
    out = capsys.readouterr().out
    assert "live since" in out and str(tmp_path) in out and "every 0.2 s" in out
    for count in (1, 0):  # shown, then its output cleared: the browser's two messages
        views(dash, count)
    shell.run_line_magic("trainwatch", "status")
    assert "live, not drawing while nobody sees the dashboard since" in capsys.readouterr().out
    shell.run_line_magic("trainwatch", "stop")
    assert "stopped after" in capsys.readouterr().out
    assert live(shell) is None and not dash.sampler.running
    assert sampler_threads() == []
    shell.run_line_magic("trainwatch", "stop")
    assert "not running" in capsys.readouterr().out


def fill_leaving(directory: Path, free_fraction: float) -> None:
    """Fill the filesystem of ``directory`` until ``free_fraction`` of it is left."""
    st = os.statvfs(directory)
    size = st.f_bavail * st.f_frsize - int(free_fraction * st.f_blocks * st.f_frsize)
    (directory / "fill.bin").write_bytes(b"\0" * size)


def test_status_counts_info_notes_apart_from_warnings(
    tmpfs_mount, fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    """``%trainwatch status`` in a real kernel, with two disks almost full (a warning and a
    critical one) and a driver that sees no GPU (gpu-unavailable, severity info): it said
    "3 warning(s)"; the note is counted apart, each word singular or plural as it should."""
    from .kernel import Kernel

    warn, crit = tmpfs_mount("8m").path, tmpfs_mount("8m").path
    fill_leaving(warn, 0.05)  # under 10 % free: warning
    fill_leaving(crit, 0.005)  # under 1 %: critical
    fake_nvml.write([])  # NVML answers, with no device
    kernel = Kernel(tmp_path, env=fake_nvml.env())
    try:
        kernel.run("%load_ext trainwatch_lab")
        kernel.run(f"%trainwatch {warn} {crit} --interval 0.2 --no-probe")
        latest = "__import__('trainwatch_lab.notebook', fromlist=['x']).current().sampler.latest"
        severities = f"sorted(a.severity for a in getattr({latest}, 'warnings', []))"
        wait_for(
            lambda: kernel.value(severities) == ["critical", "info", "warning"],
            what="two disks almost full and the GPU note",
        )
        lines = kernel.text(kernel.run("%trainwatch status")).splitlines()
        assert "  this notebook's 2 paths: 2 warnings, 1 note" in lines, lines
        # each warning in its sentence with its fix; the GPU note in words, never its code
        assert sum(line.startswith("  CRITICAL [disk-almost-full] ") for line in lines) == 1
        assert sum(line.startswith("  WARNING [disk-almost-full] ") for line in lines) == 1
        assert sum(line.startswith("    fix: ") for line in lines) == 2
        assert any(line.startswith("  GPU: ") for line in lines)
        assert not any("gpu-unavailable" in line or "[info]" in line for line in lines)
        assert not any("warning(s)" in line for line in lines)
        kernel.run("%trainwatch stop")
    finally:
        kernel.close()


def test_pause_window_and_csv_export(shell: Any, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.1 --window 1m --no-probe")
    dash = live(shell)
    wait_for(lambda: dash.points >= 3, what="three points")
    dash.pause()
    frozen, seen = dash.charts["io"].lines.x.copy(), dash.samples
    wait_for(lambda: dash.samples >= seen + 5, what="five more samples")
    assert (dash.charts["io"].lines.x == frozen).all()  # charts froze, sampling went on
    assert 'data-state="paused"' in dash.status.value
    dash.resume()
    assert len(dash.charts["io"].lines.x) > len(frozen)

    dash.window_select.value = 300.0
    assert dash.window_s == 300.0

    target = dash.export_csv(wait=True)
    assert os.path.dirname(target) == str(tmp_path)
    with open(target) as fh:
        rows = list(csv.reader(fh))
    assert rows[0][0] == "t" and f"path:{tmp_path}:avail_bytes" in rows[0]
    assert len(rows) - 1 >= 8
    assert "Saved" in dash.export_status.value and target in dash.export_status.value


# -- %%trainwatch -----------------------------------------------------------------------


CELL = """
import os, time
with open({path!r}, "wb") as fh:
    for _ in range(6):
        fh.write(os.urandom(1 << 20)); fh.flush(); os.fsync(fh.fileno())
        time.sleep(0.1)
time.sleep(0.5)
6 * 7
"""


def test_cell_magic_strip_then_summary(shell: Any, tmp_path: Path) -> None:
    with capture_output() as cap:
        result = shell.run_cell(
            f"%%trainwatch {tmp_path} --interval 0.2 --no-probe\n"
            + CELL.format(path=str(tmp_path / "w.bin"))
        )
    assert result.success and result.result == 42
    kinds = [o.data for o in cap.outputs]
    assert kinds[0]["text/plain"] == "trainwatch: watching this cell…"  # the strip
    summary = next(d for d in kinds if "tw-cell-summary" in d.get("text/html", ""))
    text = summary["text/plain"]
    assert text.startswith("trainwatch: cell ran")
    assert str(tmp_path) in text
    assert "peak write" in text
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(f"  {tmp_path}: "))
    assert lines[at].endswith("in 1 file written")  # what the cell wrote there
    assert "space used on" in lines[at + 1] and "written to" in lines[at + 1]  # its filesystem
    assert "this kernel wrote" in text
    assert sampler_threads() == []  # the cell's own sampler is gone


def test_cell_summary_counts_what_the_cell_wrote(shell: Any, tmpfs_mount) -> None:
    """On a filesystem of its own (nobody else writes there) the numbers are exact."""
    fs = tmpfs_mount("64m")
    with capture_output() as cap:
        shell.run_cell(
            f"%%trainwatch {fs.path} --interval 0.2 --no-probe\n"
            + CELL.format(path=str(fs.path / "w.bin"))
        )
    summary = next(o.data for o in cap.outputs if "tw-cell-summary" in o.data.get("text/html", ""))
    text = summary["text/plain"]
    assert f"  {fs.path}: 6 MiB in 1 file written\n    space used on {fs.path} +6 MiB" in text
    kernel_line = next(x for x in summary["text/plain"].splitlines() if "this kernel" in x)
    written = kernel_line.split("this kernel wrote ")[1].split(" (")[0]
    assert written.endswith("MiB") and float(written.split()[0]) >= 6.0


def test_cell_magic_propagates_errors_and_still_summarises(shell: Any, tmp_path: Path) -> None:
    with capture_output() as cap:
        result = shell.run_cell(f"%%trainwatch {tmp_path} --interval 0.2\nraise KeyError('boom')")
    assert isinstance(result.error_in_exec, KeyError)
    assert any("tw-cell-summary" in o.data.get("text/html", "") for o in cap.outputs)
    assert sampler_threads() == []


USER_ERROR = "x = 1\ndef f():\n    return 1 / 0\nf()"


def test_a_cell_error_is_shown_from_the_users_code(shell: Any, tmp_path: Path) -> None:
    """It showed four frames of IPython and magics.py before the user's line, and the user's
    lines as ``File <trainwatch cell>:4`` without their source."""
    with capture_output() as cap:
        result = shell.run_cell(f"%%trainwatch {tmp_path} --interval 0.2 --no-probe\n{USER_ERROR}")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert shell.user_ns["x"] == 1  # what ran before the error stays, as in any cell
    assert any("tw-cell-summary" in o.data.get("text/html", "") for o in cap.outputs)
    shown = strip_ansi(cap.stdout)
    frames = [line for line in shown.splitlines() if line.startswith(("Cell In[", "File "))]
    assert len(frames) == 2, shown  # line numbers as in the cell, the magic's line being 1
    assert frames[0].endswith(", line 5") and frames[1].endswith(", line 4, in f()")
    assert "----> 5 f()" in shown and "----> 4     return 1 / 0" in shown
    ours_all = ("magics.py", "kernel_watch.py", "cell_run.py", "IPython/core", "run_cell_magic")
    for ours in (*ours_all, "<trainwatch cell>"):
        assert ours not in shown
    with capture_output() as cap:  # %tb (and %debug) still get the whole traceback
        shell.run_line_magic("tb", "")
    assert "magics.py" in strip_ansi(cap.stdout)


def test_a_syntax_error_in_the_cell_starts_nothing(shell: Any, tmp_path: Path) -> None:
    with capture_output() as cap:
        result = shell.run_cell(f"%%trainwatch {tmp_path}\nx = 1\nif x:\nx = 2")
    assert isinstance(result.error_in_exec, UsageError)
    shown = strip_ansi(cap.stdout + cap.stderr)
    assert re.search(r"Cell In\[\d+\], line 4\n", shown), shown
    assert "IndentationError: expected an indented block" in shown
    assert "UsageError: trainwatch: the cell was not run: syntax error (above)" in shown
    assert "magics.py" not in shown and "IPython/core" not in shown
    assert "cell_run.py" not in shown
    assert cap.outputs == []  # no "watching this cell" strip
    assert sampler_threads() == [] and "x" not in shell.user_ns


def test_cell_magic_reuses_a_live_sampler(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    dash = live(shell)
    with capture_output():
        result = shell.run_cell(
            f"%%trainwatch {tmp_path / 'sub'}\nimport time\ntime.sleep(0.6)\n'done'"
        )
    assert result.result == "done"
    assert sampler_threads() and dash.sampler.running
    assert str(tmp_path / "sub") in dash.paths()


def test_unload_stops_everything(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    shell.run_line_magic("unload_ext", "trainwatch_lab")
    assert sampler_threads() == []
    assert "trainwatch" not in shell.magics_manager.magics["line"]
    shell.run_line_magic("load_ext", "trainwatch_lab")  # the fixture unloads again


def test_discovery_after_each_cell_adds_paths(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    dash = live(shell)
    shell.run_cell(
        "class ModelCheckpoint:\n"
        "    def __init__(self, dirpath):\n"
        "        self.dirpath = dirpath\n"
        f"ckpt = ModelCheckpoint({str(tmp_path / 'ckpt')!r})"
    )
    assert str(tmp_path / "ckpt") in dash.paths()
    found = state_for(shell).discovered[str(tmp_path / "ckpt")]
    assert found.where == "ckpt.dirpath"
    # only re-assigned names are looked at again: a changed attribute on an old object is
    # picked up once the variable is assigned again
    shell.run_cell(f"ckpt.dirpath = {str(tmp_path / 'later')!r}")
    assert str(tmp_path / "later") not in dash.paths()
    shell.run_cell("ckpt = ckpt.__class__(ckpt.dirpath)")
    assert str(tmp_path / "later") in dash.paths()


def test_a_path_on_a_dead_mount_is_accepted_not_waited_for(sshfs_mount) -> None:
    """Validation goes through the mount guard: a server that stopped answering costs the
    check's timeout, then the path is watched (the sampler reports the dead mount)."""
    sshfs_mount.pause()
    try:
        opts = parse_options(f"--logdir {sshfs_mount.path}/runs")
    finally:
        sshfs_mount.resume()
    assert opts.logdir == f"{sshfs_mount.path}/runs"


# -- a logdir not created yet; what can never be watched (issue 10, items 4 and 9) ---------


def test_a_logdir_not_created_yet_is_watched_where_it_will_be(shell: Any, tmp_path: Path) -> None:
    later = tmp_path / "x" / "not-yet"
    with capture_output() as cap:
        shell.run_line_magic("trainwatch", f"{later} --interval 0.2 --no-probe")
    assert f"trainwatch: {later}: not created yet; checked at {tmp_path}\n" in cap.stdout
    dash = live(shell)
    state = wait_for(
        lambda: (dash.sampler.latest or None) and dash.sampler.latest.paths[str(later)]
    )
    assert not state.exists and state.note == f"not created yet; checked at {tmp_path}"
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd/x", "/etc/passwd/x cannot exist: /etc/passwd is a file, not a directory"),
        ("/dev/null", "/dev/null is not storage: a character device"),
    ],
)
def test_a_path_that_can_never_hold_logs_is_refused_in_one_line(
    shell: Any, path: str, why: str
) -> None:
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("trainwatch", path)
    message = str(err.value)
    assert message.startswith(f"trainwatch: {why}") and "\n" not in message
    assert live(shell) is None


@pytest.mark.kernel
def test_through_a_real_kernel(tmp_path: Path) -> None:
    """``%trainwatch`` in a real ipykernel: the note under the cell; one line for a path
    that can never be created, and no dashboard for it."""
    from .kernel import Kernel

    kernel = Kernel(tmp_path)
    try:
        kernel.run("%load_ext trainwatch_lab")
        later = tmp_path / "x" / "not-yet"
        text = kernel.text(kernel.run(f"%trainwatch {later} --interval 0.5 --no-probe"))
        assert f"trainwatch: {later}: not created yet; checked at {tmp_path}\n" in text
        kernel.run("%trainwatch stop")
        refused = kernel.run("%trainwatch /etc/passwd/x")
        lines = [line for line in kernel.text(refused).splitlines() if line.strip()]
        assert lines == [
            "UsageError: trainwatch: /etc/passwd/x cannot exist: /etc/passwd is a file, "
            "not a directory"
        ]
        assert kernel.value("__import__('trainwatch_lab').notebook.magics.current() is None")
    finally:
        kernel.close()


def test_the_kernels_process_is_judged_over_the_running_cell(shell: Any, tmp_path: Path) -> None:
    """io-bound averaged the idle time before a cell in (issue 36 item 2): the dashboard's
    process source learns when the running cell began, and a sample taken in a cell says so."""
    shell.run_line_magic("trainwatch", f"{tmp_path} --interval 0.2 --no-probe")
    sampler = live(shell).sampler
    source = sampler.find_source("process")
    assert source is not None and source.busy_since is not None
    shell.run_cell(
        "import time\n_t0 = time.time()\n"
        "from trainwatch_lab.notebook.magics import state_for\n"
        "_s = state_for(get_ipython()).dashboard.sampler.tick_now(5)\n"
    )
    seen = shell.user_ns["_s"].process
    assert seen.running_what == "cell", seen
    assert abs(seen.running_since - shell.user_ns["_t0"]) < 1.0, seen
