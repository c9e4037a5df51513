"""Through a real kernel (ipykernel over ZMQ): updates from the sampler thread while another
cell runs, warnings under the cell that is running when they start (once per condition),
the discovery alert under the cell that created a writer, and bytes per tick on the wire.

The tests marked ``both`` run on ipykernel 7 and on ipykernel 6: 7 changed where output
from threads goes, and the alerts under the running cell must land right on either."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import need
from tests.support.lab import artifact_path
from trainwatch_lab.core.defaults import MIB
from trainwatch_lab.notebook.warnings_html import ALERT_MIME

from .kernel import (
    FLAVOURS,
    KERNEL_NAME,
    REPO,
    Kernel,
    KernelSetupError,
    ipykernel6_kernel_dir,
    kernel_spec_for,
    wire_bytes,
)

both = pytest.mark.parametrize("kernel", FLAVOURS, indirect=True)


@pytest.fixture(scope="session")
def ipykernel6_dir() -> Path:
    """Built once per machine (cached under /tmp); needs the package index the first time."""
    try:
        return ipykernel6_kernel_dir()
    except KernelSetupError as exc:
        need(False, f"no ipykernel 6 kernel: {exc}")
        raise


@pytest.fixture
def kernel(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kernel]:
    flavour = getattr(request, "param", "ipykernel7")
    kernels = request.getfixturevalue("ipykernel6_dir") if flavour == "ipykernel6" else None
    name, spec_manager = kernel_spec_for(flavour, kernels)
    k = Kernel(tmp_path, name, spec_manager=spec_manager)
    k.flavour = flavour  # type: ignore[attr-defined]
    try:
        yield k
    finally:
        k.close()


def alerts_in(kernel: Kernel, msg_id: str) -> list[dict]:
    found = []
    for m in kernel.outputs(msg_id, ("display_data",)):
        data = m["content"]["data"]
        if ALERT_MIME in data:
            found.extend(data[ALERT_MIME]["alerts"])
    return found


@both
def test_kernel_version_is_reported(kernel: Kernel) -> None:
    version = kernel.value("__import__('ipykernel').__version__")
    print(f"ipykernel {version} in kernel {kernel.km.kernel_name}")
    major = int(version.split(".")[0])
    if kernel.flavour == "ipykernel6":  # type: ignore[attr-defined]
        assert major == 6  # the venv's ipykernel 6 really shadows the system's 7
    elif KERNEL_NAME == "python3":
        assert major >= 7


@both
def test_dashboard_moves_while_another_cell_runs(kernel: Kernel, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    kernel.run("%load_ext trainwatch_lab")
    start = kernel.run(f"%trainwatch {data} --interval 0.5")
    views = [
        m
        for m in kernel.outputs(start, ("display_data",))
        if "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
    ]
    assert len(views) == 1
    assert views[0]["content"]["data"]["text/plain"].startswith("trainwatch")
    kernel.drain(1.0)
    before = kernel.value(
        "__import__('trainwatch_lab.notebook.magics', fromlist=['x'])"
        ".state_for(get_ipython()).dashboard.samples"
    )
    first = len(kernel.messages)
    busy = kernel.run(
        "import os, time\n"
        f"with open({str(data / 'blob')!r}, 'wb') as fh:\n"
        "    for _ in range(40):\n"
        "        fh.write(os.urandom(1 << 18)); fh.flush(); os.fsync(fh.fileno())\n"
        "        time.sleep(0.1)\n"
    )
    during = [m for m in kernel.messages[first:] if m["msg_type"] == "comm_msg"]
    after = kernel.value(
        "__import__('trainwatch_lab.notebook.magics', fromlist=['x'])"
        ".state_for(get_ipython()).dashboard.samples"
    )
    ticks = after - before
    assert ticks >= 4  # the sampler kept ticking while the cell held the main thread
    updates = [m for m in during if m["content"]["data"].get("method") == "update"]
    assert len(updates) >= ticks - 1  # and each tick reached the widgets during that cell
    assert not kernel.outputs(busy, ("display_data",))  # nothing leaked into the busy cell
    per_tick = sum(wire_bytes(m) for m in updates) / ticks
    out = artifact_path(f"notebook-traffic-kernel-{kernel.km.kernel_name}.json")
    out.write_text(
        json.dumps(
            {
                "window_s": 600,
                "interval_s": 0.5,
                "ticks": ticks,
                "comm_messages": len(updates),
                "wire_bytes_per_tick": round(per_tick),
            },
            indent=1,
        )
    )
    assert per_tick < 64 * 1024


@both
def test_warning_that_starts_during_a_cell_lands_under_that_cell(
    kernel: Kernel, tmp_path: Path
) -> None:
    """Threshold lowered so a real statvfs of a real directory trips disk-almost-full."""
    kernel.run("%load_ext trainwatch_lab")
    create = kernel.run(
        "import dataclasses, time\n"
        "from trainwatch_lab import TrainWatch\n"
        "from trainwatch_lab.core.defaults import DEFAULTS\n"
        "tight = dataclasses.replace(DEFAULTS, full_fraction=1.0)\n"
        "tw = TrainWatch([], interval=0.3, probe=False, defaults=tight)\n"
        "time.sleep(1.0)\n"
    )
    assert alerts_in(kernel, create) == []  # nothing watched yet, nothing to say
    kernel.drain(0.5)
    running = kernel.run(f"tw.add_path({str(tmp_path)!r}); time.sleep(3)")
    shown = alerts_in(kernel, running)
    assert [a["code"] for a in shown] == ["disk-almost-full"]
    assert shown[0]["subject"] == str(tmp_path)
    assert shown[0]["fix"]
    # once per condition: it stays active, the next cells do not repeat it
    later = kernel.run("time.sleep(2)")
    assert alerts_in(kernel, later) == []
    # and it never went anywhere else (not under the cell that started the sampler thread)
    everywhere = [
        m
        for m in kernel.messages
        if m["msg_type"] == "display_data" and ALERT_MIME in m["content"]["data"]
    ]
    assert [m["parent_header"]["msg_id"] for m in everywhere] == [running]
    kernel.run("tw.stop()")


@both
def test_our_notices_are_plain_text_under_the_cell_never_stderr(kernel: Kernel) -> None:
    """JupyterLab asks the server about every path in a stderr output (issue 34: on a hung
    share that froze it); our notices name shares, so they are display text, which it shows
    as it is. From a background thread, as the mirror logs."""
    share = "/mnt/share/runs/exp1"
    kernel.run("%load_ext trainwatch_lab")
    cell = kernel.run(
        "import logging, threading\n"
        "log = logging.getLogger('trainwatch_lab.fix.mirror')\n"
        f"t = threading.Thread(target=log.warning, args=('trainwatch: mirror of %s: no answer',"
        f" {share!r}))\n"
        "t.start(); t.join()"
    )
    assert [m["content"]["text"] for m in kernel.outputs(cell, ("stream",))] == []
    shown = [m["content"]["data"] for m in kernel.outputs(cell, ("display_data",))]
    assert shown == [{"text/plain": f"trainwatch: mirror of {share}: no answer"}]
    unloaded = kernel.run("%unload_ext trainwatch_lab\nlog.warning('after %s', 'unload')")
    assert "after unload" in kernel.text(unloaded)  # the logger is the user's again


@both
def test_the_summary_takes_the_place_of_the_warnings_raised_in_its_cell(
    kernel: Kernel, tmpfs_mount
) -> None:
    """A warning raised while a ``%%trainwatch`` cell runs is shown under it at once; when
    the summary, which lists it on a line that opens to its sentence and fix, takes the
    strip's place, that copy is emptied (update_display_data): one entry per warning."""
    disk = Path(tmpfs_mount("16m").path)
    kernel.run("%load_ext trainwatch_lab")
    cell = kernel.run(
        f"%%trainwatch {disk} --interval 0.3 --no-probe\n"
        "import os, time\n"
        f"with open({str(disk / 'ckpt.pt')!r}, 'wb') as fh:\n"
        "    fh.write(os.urandom(15 << 20))\n"
        "time.sleep(6)\n"  # 20 ticks: the warning is raised in the cell under any load
    )
    shown = [
        m for m in kernel.outputs(cell, ("display_data",)) if ALERT_MIME in m["content"]["data"]
    ]
    codes = [a["code"] for m in shown for a in m["content"]["data"][ALERT_MIME]["alerts"]]
    assert "disk-almost-full" in codes, kernel.text(cell)
    ids = {m["content"]["transient"]["display_id"] for m in shown}
    emptied = {
        m["content"]["transient"].get("display_id")
        for m in kernel.outputs(cell, ("update_display_data",))
        if m["content"]["data"] == {}
    }
    assert ids and ids <= emptied, (ids, emptied)
    summary = kernel.text(cell)
    assert "[disk-almost-full]" in summary, summary


@both
def test_discovered_writer_on_sshfs_alerts_under_its_cell(kernel: Kernel, sshfs_mount) -> None:
    kernel.run("%load_ext trainwatch_lab")
    logdir = sshfs_mount.path / "runs"
    cell = kernel.run(
        "class SummaryWriter:\n"
        "    def __init__(self, log_dir):\n"
        "        self.log_dir = log_dir\n"
        f"writer = SummaryWriter({str(logdir)!r})\n"
    )
    shown = {a["code"]: a for a in alerts_in(kernel, cell)}
    assert "shared-mount" in shown  # (a slow-mount may join it: sshfs is measured too)
    assert shown["shared-mount"]["subject"] == str(logdir)
    assert "fuse.sshfs" in shown["shared-mount"]["message"]
    quiet = kernel.run("writer2 = writer")  # the same path again: no second alert
    assert alerts_in(kernel, quiet) == []


def test_logdir_on_sshfs_alerts_right_away(kernel: Kernel, sshfs_mount) -> None:
    kernel.run("%load_ext trainwatch_lab")
    cell = kernel.run(f"%trainwatch --logdir {sshfs_mount.path} --interval 0.5")
    shown = alerts_in(kernel, cell)
    assert "shared-mount" in [a["code"] for a in shown]
    html = next(
        m["content"]["data"]["text/html"]
        for m in kernel.outputs(cell, ("display_data",))
        if ALERT_MIME in m["content"]["data"]
    )
    assert "Fix:" in html and "var(--jp-warn-color1)" in html
    # the sampler's own warnings later are the same conditions: not repeated
    later = kernel.run("import time; time.sleep(2)")
    assert not {a["code"] for a in alerts_in(kernel, later)} & {a["code"] for a in shown}
    kernel.run("%trainwatch stop")


def test_discovered_writer_on_a_dead_mount_alerts_and_the_cell_finishes(
    kernel: Kernel, sshfs_mount
) -> None:
    """The server stops answering (sftp-server SIGSTOPped): the check is bounded, the cell
    completes, and the alert says the mount does not answer."""
    kernel.run("%load_ext trainwatch_lab")
    sshfs_mount.pause()
    try:
        cell = kernel.run(
            "class SummaryWriter:\n"
            "    def __init__(self, log_dir):\n"
            "        self.log_dir = log_dir\n"
            f"writer = SummaryWriter({str(sshfs_mount.path / 'runs')!r})\n",
            timeout=60,
        )
        codes = [a["code"] for a in alerts_in(kernel, cell)]
        assert "mount-unresponsive" in codes
        assert kernel.value("1 + 1") == 2  # the kernel is free again
    finally:
        sshfs_mount.resume()


# -- %%trainwatch summaries ---------------------------------------------------------------

UNITS = {"B": 1, "KiB": 1024, "MiB": MIB, "GiB": 1024 * MIB}
SIZE = r"([+-]?[\d.]+ (?:B|KiB|MiB|GiB))"


def size(text: str) -> float:
    number, unit = text.split()
    return float(number) * UNITS[unit]


def cell_summary(kernel: Kernel, msg_id: str) -> str:
    """The text/plain of the summary that replaced the cell's strip."""
    found = [
        m["content"]["data"]["text/plain"]
        for m in kernel.outputs(msg_id, ("display_data", "update_display_data"))
        if "tw-cell-summary" in m["content"]["data"].get("text/html", "")
    ]
    assert found, kernel.text(msg_id)
    return found[-1]


def summary_numbers(text: str, device: str, path: Path) -> dict[str, float]:
    """The numbers of one summary: its samples, its device, filesystem and kernel rows."""
    samples = re.search(r"^trainwatch: cell ran .+ \((\d+) samples?\)$", text, re.M)
    disk = re.search(rf"^  disk {device}: {SIZE} written during the cell", text, re.M)
    rows = [  # the filesystem's line under its paths' lines (one per filesystem)
        line for line in text.splitlines() if line.startswith(f"    space used on {path} ")
    ]
    assert samples and disk and len(rows) == 1, text  # one line for the filesystem
    fs = re.search(
        rf"space used on {re.escape(str(path))} {SIZE}; {SIZE} written to {device}\b", rows[0]
    )
    kernel = re.search(rf"^  this kernel wrote {SIZE}(.*)$", text, re.M)
    assert fs and kernel, text
    reached = re.search(rf"; {SIZE} reached the disk", kernel[2])
    cached = re.search(rf"[;,] {SIZE} still in the page cache \(not yet on disk\)$", kernel[2])
    return {
        "samples": int(samples[1]),
        "disk": size(disk[1]),
        "used": size(fs[1]),
        "row_written": size(fs[2]),
        "kernel": size(kernel[1]),
        "reached": size(reached[1]) if reached else 0.0,
        "cached": size(cached[1]) if cached else 0.0,
    }


def test_cell_summaries_agree_and_never_reuse_the_previous_cell(kernel: Kernel, loop_ext4) -> None:
    """A live dashboard ticking every 2 min and two ``%%trainwatch`` cells, far shorter than
    that, on an ext4 of their own (so every byte on its device is ours): each cell gets a
    sample taken as it ends, its rows agree, and the next cell shows none of its writes."""
    fs = loop_ext4(160)
    run = fs.path / "run"
    run.mkdir()
    kernel.run("%load_ext trainwatch_lab")
    kernel.run(f"%trainwatch {fs.path} {run} --interval 120 --no-probe")
    kernel.drain(0.5)

    took = time.monotonic()
    write = kernel.run(
        f"%%trainwatch {run} --no-probe\n"
        "import os\n"
        f"with open({str(run / 'blob')!r}, 'wb') as fh:\n"
        "    fh.write(os.urandom(50 * 2**20)); fh.flush(); os.fsync(fh.fileno())\n"
    )
    took = time.monotonic() - took
    text = cell_summary(kernel, write)
    print(text)
    first = summary_numbers(text, fs.device, fs.path)
    # its last sample was asked for as it ended, not at the tick 2 min away (a margin that
    # no load reaches: the cell itself takes a second)
    assert took < 60
    assert first["samples"] >= 1
    # each watched path says what the cell wrote under it, then one line for their filesystem
    assert f"  {run}: 50 MiB in 1 file written\n  {fs.path}: 50 MiB in 1 file written\n" in text
    assert 49.5 * MIB <= first["used"] <= 52 * MIB
    # (rates are integrated over sample times, each source divides by its own clock: a few
    # milliseconds apart over a sub-second cell is a few percent)
    assert 47.5 * MIB <= first["kernel"] <= 52.5 * MIB
    assert 47.5 * MIB <= first["reached"] <= 52.5 * MIB and first["cached"] == 0  # fsync'd
    assert 47.5 * MIB <= first["disk"] <= 60 * MIB  # the file, with its metadata and journal
    assert first["row_written"] == first["disk"]

    nothing = kernel.run(f"%%trainwatch {run} --no-probe\n1/0")
    assert "ZeroDivisionError" in kernel.text(nothing)
    text = cell_summary(kernel, nothing)
    print(text)
    second = summary_numbers(text, fs.device, fs.path)
    assert second["samples"] >= 1
    assert second["kernel"] < MIB and second["reached"] < MIB and second["cached"] == 0
    assert abs(second["used"]) < MIB
    assert second["disk"] < 5 * MIB  # (ext4 may still be initialising its inode tables)

    # no fsync: the pages are dirty, the disk has not seen them yet (the flusher waits 30 s
    # unless someone syncs): whichever it is, the two parts add up to what the kernel wrote
    cached = kernel.run(
        f"%%trainwatch {run} --no-probe\n"
        "import time\n"
        f"with open({str(run / 'cached')!r}, 'wb') as fh:\n"
        "    fh.write(os.urandom(20 * 2**20))\n"
        "time.sleep(0.3)\n"
    )
    text = cell_summary(kernel, cached)
    print(text)
    third = summary_numbers(text, fs.device, fs.path)
    assert 19 * MIB <= third["kernel"] <= 21 * MIB
    assert 19 * MIB <= third["reached"] + third["cached"] <= 21 * MIB
    assert third["reached"] <= third["disk"] * 1.05
    kernel.run("%trainwatch stop")


# -- %%trainwatch: an error is shown from the user's code ---------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")
OUR_FRAMES = (
    "magics.py",
    "kernel_watch.py",
    "cell_run.py",
    "IPython/core",
    "run_cell_magic",
    "interactiveshell",
    "<trainwatch",
)


def error_frames(cell: Any) -> tuple[list[str], str]:
    """The frame lines ("Cell In[2], line 5", "File ...") of a cell's one error output."""
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    text = ANSI.sub("", "\n".join(errors[0].traceback))
    frames = [line for line in text.splitlines() if line.startswith(("Cell In[", "File "))]
    return frames, text


def summary_shown(cell: Any) -> bool:
    return any(
        o.get("data", {}).get("text/plain", "").startswith("trainwatch: cell ran")
        for o in cell.outputs
    )


def test_an_error_under_trainwatch_starts_at_the_users_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As nbclient (CI) runs a notebook: an exception in a ``%%trainwatch`` cell fails that
    cell with the user's exception, its traceback starts at the user's line (it showed four
    frames of IPython and magics.py first), the summary still replaces the strip, and what
    the cell assigned before the error stays. A Ctrl-C (SIGINT, what interrupting the kernel
    sends) is shown the same way, and the kernel goes on."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    magic = f"%%trainwatch {tmp_path} --interval 0.2 --no-probe"
    sources = [
        "%load_ext trainwatch_lab",
        f"{magic}\nx = 1\ndef f():\n    return 1 / 0\nf()",
        "print(x)",
        f"{magic}\nimport os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(60)",
        "print('still here')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    cells = nb.cells
    client = NotebookClient(
        nb, timeout=120, kernel_name=KERNEL_NAME, resources={"metadata": {"path": tmp_path}}
    )
    with client.setup_kernel():
        client.execute_cell(cells[0], 0)
        with pytest.raises(CellExecutionError) as failed:
            client.execute_cell(cells[1], 1)
        assert failed.value.ename == "ZeroDivisionError"
        client.execute_cell(cells[2], 2)
        with pytest.raises(CellExecutionError) as interrupted:
            client.execute_cell(cells[3], 3)
        assert interrupted.value.ename == "KeyboardInterrupt"
        client.execute_cell(cells[4], 4)

    frames, text = error_frames(cells[1])
    assert len(frames) == 2, text  # line numbers as in the cell, the magic's line being 1
    assert frames[0].endswith("], line 5") and frames[1].endswith("], line 4, in f()"), text
    assert "----> 5 f()" in text and "----> 4     return 1 / 0" in text
    assert not [ours for ours in OUR_FRAMES if ours in text], text
    assert summary_shown(cells[1])
    assert cells[2].outputs[0].text == "1\n"  # the cell's variables are the notebook's

    frames, text = error_frames(cells[3])
    assert frames and all(f.startswith("Cell In[") for f in frames), text
    assert not [ours for ours in OUR_FRAMES if ours in text], text
    assert summary_shown(cells[3])
    assert cells[4].outputs[0].text == "still here\n"
