"""``%trainwatch --since`` and ``TrainWatch(since=...)``: the recorded history replayed in the
notebook (issue 27, item 5). In an IPython shell against stores written with the store's
own API; and in a fresh real kernel against a store where a script died of a full disk (a
loop ext4), a run was OOM-killed in a memory cgroup and a real kernel was OOM-killed too."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.kernel import Kernel
from tests.record.scenarios import (
    CLI,
    ENV,
    HOG,
    history,
    plain_script_endings,
    record_full_disk,
    recording_watch,
    store_events,
)
from tests.record.scenarios import memory_cgroup as memory_cgroup  # a fixture
from tests.support.mounts import wait_until
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.record import Event, Store
from trainwatch_lab.core.record.events import EventWatch
from trainwatch_lab.core.record.location import STORE_ENV
from trainwatch_lab.notebook.dashboard.replay import Replay

REPLAY_VIEW = (
    "__import__('trainwatch_lab.notebook.magics').notebook.magics.state_for(get_ipython())"
)


def _full_disk_store(path: Path, end: float) -> None:
    """A run that died with /data at 0 B free, warned about 5 minutes before."""
    store = Store(str(path), role="t")
    store.register()
    ts = [end - 600 + 10 * i for i in range(61)]
    avail = [max(0.0, 1e9 - 2e7 * i) for i in range(61)]
    store.close_blocks(
        {
            "path:/data:avail_bytes": (ts, avail),
            "path:/data:free_bytes": (ts, avail),
            "path:/data:total_bytes": (ts, [2e9] * 61),
            "path:/data/ckpt:avail_bytes": (ts, avail),  # the same filesystem: one line
            "path:/data/ckpt:total_bytes": (ts, [2e9] * 61),
            "disk:sda:wmb_s": (ts, [20.0] * 61),
            "disk:sda:rmb_s": (ts, [1.0] * 61),
        }
    )
    warn = {"code": "disk-filling", "severity": "warning", "subject": "/data"}
    ended = {
        "pid": 7,
        "started": end - 3000,
        "paths": ["/data"],
        "stderr_tail": ["OSError: [Errno 28] No space left on device"],
    }
    store.add_events(
        [
            Event(end - 300, "warning-raised", "/data", "disk-filling: /data fills", warn),
            Event(end - 5, "process-ended", "train.py", "train.py (pid 7) ended", ended),
        ]
    )
    store.close()


def _shown(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


def test_the_magic_replays_the_window_with_its_ending_and_markers(
    shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    store = tmp_path / "h.sqlite"
    _full_disk_store(store, time.time() - 60)
    monkeypatch.setenv(STORE_ENV, str(store))
    shell.run_line_magic("trainwatch", "--since 1h")
    shell.run_line_magic("trainwatch", "status")
    assert "not running" in _shown(capsys)  # a replay starts no sampler
    from trainwatch_lab.notebook.magics import state_for

    replay = state_for(shell).replay_view
    assert isinstance(replay, Replay) and replay.wait(60) and replay.error is None
    (ending,) = replay.recorded.endings
    said = r"train\.py ended at \d\d:\d\d:\d\d after 49 m 55 s: /data was full \(0 B free"
    assert re.match(said, ending["sentence"]), ending["sentence"]
    assert "disk-filling warned at" in ending["sentence"] and "Errno 28" in ending["sentence"]
    assert ending["sentence"] in replay.endings.value  # above the charts
    assert [c for c in replay.grid.children] == [replay.charts[n].figure for n in ("io", "space")]
    assert replay.charts["space"].points > 1 and replay.charts["io"].points > 1
    assert "/data (+1)" in replay.charts["space"].head.value  # one filesystem, one line
    marks = replay.markers["space"]
    assert marks.count == 2
    assert [n.split(" ", 1)[1] for n in marks.points.names] == [
        "disk-filling: /data fills",
        "train.py (pid 7) ended",
    ]
    assert marks.rules.x.shape == (2, 2)  # a vertical rule per event
    assert "Events (2)" in replay.events.value
    assert ending["sentence"] in replay.text()  # what a frontend without widgets shows


def test_the_widget_s_since_is_the_same_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainwatch_lab import TrainWatch

    store = tmp_path / "h.sqlite"
    _full_disk_store(store, time.time() - 60)
    monkeypatch.setenv(STORE_ENV, str(store))
    an_hour_ago = datetime.datetime.now() - datetime.timedelta(hours=1)
    for since in (3600, "1h", an_hour_ago):
        replay = TrainWatch(since=since)
        try:
            assert isinstance(replay, Replay) and replay.wait(60), since
            assert replay.error is None and len(replay.recorded.endings) == 1, since
            assert replay.charts["space"].points > 1
        finally:
            replay.close()
    with pytest.raises(TypeError, match=r"^TrainWatch\(since=\.\.\.\) replays the recorded"):
        TrainWatch(["/data"], since="1h")
    with pytest.raises(ValueError, match=r"^since: expected 8h.*got 'yesterday'$"):
        TrainWatch(since="yesterday")
    with pytest.raises(ValueError, match=r"^since must be seconds ago \(0 or more\), got -5"):
        TrainWatch(since=-5)
    with pytest.raises(ValueError, match=r"must be before until"):
        TrainWatch(since="1h", until="2h")


def test_the_read_runs_off_the_main_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "h.sqlite"
    _full_disk_store(store, time.time() - 60)
    readers: list[str] = []
    real = Store.__init__

    def watched(self: Store, *args: Any, **kwargs: Any) -> None:  # (a probe, not a fake)
        readers.append(threading.current_thread().name)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "__init__", watched)
    replay = Replay("1h", path=str(store))
    assert replay.wait(60) and replay.error is None
    assert readers and set(readers) == {"trainwatch-replay"}


def test_no_history_is_one_line_saying_where_and_how(
    shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    missing = tmp_path / "none" / "history.sqlite"
    monkeypatch.setenv(STORE_ENV, str(missing))
    from trainwatch_lab.notebook.magics import state_for

    shell.run_line_magic("trainwatch", "--since 8h")
    out = _shown(capsys)
    assert out.count("\n") == 1, out
    assert out.startswith(f"trainwatch: no recorded history at {missing}; "), out
    assert "c.TrainWatch.record = True" in out and "trainwatch-lab watch --record" in out
    assert state_for(shell).replay_view is None  # nothing shown
    assert not missing.parent.exists()  # a replay creates nothing


@pytest.mark.parametrize(
    "line, said",
    [
        ("--since yesterday", "trainwatch: --since: expected 8h, 30m, 2d (ago), "),
        ("--snice 8h", "did you mean --since?"),
        ("--since", "trainwatch: --since needs a value, e.g. %trainwatch --since 8h"),
        ("--since 1h --until 2h", "trainwatch: --since ("),
        ("--since 8h runs", "trainwatch: PATH is for the live dashboard"),
        ("--since 8h --interval 2", "trainwatch: --interval is for the live dashboard"),
    ],
)
def test_a_bad_replay_line_is_one_line_and_shows_nothing(
    shell: Any, line: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.error import UsageError

    from trainwatch_lab.notebook.magics import state_for

    monkeypatch.setenv(STORE_ENV, str(tmp_path / "h.sqlite"))
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("trainwatch", line)
    assert said in str(err.value) and "\n" not in str(err.value), str(err.value)
    state = state_for(shell)
    assert state.replay_view is None and state.dashboard is None


def test_a_replay_in_a_cell_magic_is_refused(shell: Any) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="in a line of its own"):
        shell.run_cell_magic("trainwatch", "--since 8h", "x = 1")
    assert "x" not in shell.user_ns


# -- in a fresh real kernel, after real deaths ---------------------------------------------


def _kernel_oom_killed(store: Path, tmp_path: Path, cgroup: Path) -> None:
    """A real ipykernel in the memory cgroup, seen by the events as the server's sampler
    reports kernels, allocates past the limit and is killed; its end goes into ``store``."""
    kernel = Kernel(tmp_path)
    try:
        pid = kernel.km.provisioner.process.pid
        (cgroup / "cgroup.procs").write_text(str(pid))
        watch = EventWatch()
        started = watch.observe(
            Sample(t=time.time(), kernels={"k1": {"pid": pid, "name": "python3"}})
        )
        kernel.kc.execute("x = bytearray(512 << 20)")
        assert wait_until(lambda: not os.path.exists(f"/proc/{pid}/cmdline") or _zombie(pid), 60)
    finally:
        kernel.close()
    ended = watch.observe(Sample(t=time.time()))
    assert [e.kind for e in started + ended] == ["kernel-started", "kernel-ended"]
    writer = Store(str(store), role="server")
    writer.register()
    writer.add_events(started + ended)
    writer.close()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_fresh_kernel_replays_why_runs_died(
    loop_ext4: Any, memory_cgroup: Path, tmp_path: Path
) -> None:
    store = tmp_path / "state" / "history.sqlite"
    disk = loop_ext4(size_mb=24)
    record_full_disk(store, disk.mountpoint, tmp_path)
    hog = [*CLI, "run", "--store", str(store), "--", sys.executable, "-c", repr(HOG.format(1))]
    done = subprocess.run(
        ["sh", "-c", f"echo $$ > {memory_cgroup}/cgroup.procs; exec {' '.join(hog)}"],
        env=ENV,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 137, done.stderr
    _kernel_oom_killed(store, tmp_path, memory_cgroup)
    why = history(store, "why", "--since", "1h")  # the CLI's words: the replay must agree

    kernel = Kernel(tmp_path, env={**os.environ, STORE_ENV: str(store)})
    try:
        msg = kernel.run("%load_ext trainwatch_lab\n%trainwatch --since 1h")
        shown = kernel.text(msg)
        print(shown)  # (with -s: what the notebook shows without widgets)
        # the discovery sees the whole machine: other tests' scripts may have ended too
        mine = (str(disk.mountpoint), str(memory_cgroup))
        lines = [line.strip() for line in why.splitlines() if any(m in line for m in mine)]
        assert len(lines) == 3, why
        for sentence in lines:  # every ending in its sentence, evidence and all
            assert sentence in shown, (sentence, shown)
        assert f"{disk.mountpoint}/runs was full (" in shown and "Errno 28" in shown
        oom = "the kernel's out-of-memory killer ended it (oom_kill "
        assert sum(oom in line and str(memory_cgroup) in line for line in lines) == 2, lines
        assert re.search(
            r"kernel python3 ended at \d\d:\d\d:\d\d after [^:]+: the kernel's out-of", shown
        )
        view = f"{REPLAY_VIEW}.replay_view"
        points = kernel.value(f"{{n: c.points for n, c in {view}.charts.items()}}")
        assert points["space"] > 1 and points["io"] > 1, points  # drawn from the record
        marked = kernel.value(f"[str(n) for n in {view}.markers['space'].points.names]")
        assert any("train_until_full.py" in m and "ended" in m for m in marked), marked
        assert kernel.value(f"{REPLAY_VIEW}.dashboard is None")  # no live sampler started
    finally:
        kernel.close()


def test_a_fresh_kernel_replays_a_plain_script_s_three_endings(
    loop_ext4: Any, tmp_path: Path
) -> None:
    """Issue 35 item 1: a plain script (no TensorBoard, no GPU, nohup) writing into a watched
    64 MiB loop ext4, killed, exiting 0 and dying of Errno 28 while `watch --record` records;
    the recorder is gone, and a fresh kernel's `%trainwatch --since 1h` tells the three ends
    in `history why`'s words."""
    from tests.record.test_why import connector_opens
    from tests.support.env import need, need_root

    need_root()  # fanotify
    need(connector_opens(), "needs the process connector for exit statuses")
    store = tmp_path / "state" / "history.sqlite"
    disk = loop_ext4(size_mb=64)
    with recording_watch(store, disk.mountpoint, tmp_path):
        pids = plain_script_endings(store_events(store), disk.mountpoint, tmp_path)
    told = {k: history(store, "why", str(pid)).strip() for k, pid in pids.items()}
    kernel = Kernel(tmp_path, env={**os.environ, STORE_ENV: str(store)})
    try:
        shown = kernel.text(kernel.run("%load_ext trainwatch_lab\n%trainwatch --since 1h"))
    finally:
        kernel.close()
    print(shown)
    for sentence in told.values():
        assert sentence in shown, (sentence, shown)
    assert f"{disk.mountpoint} was full (" in told["full"] and "(killed by SIGKILL" in shown
    assert told["clean"].endswith("it exited normally (status 0)")


def test_a_slow_read_shows_the_widget_at_once_and_fills_it_in(
    shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no time to wait (``replay_wait_s`` 0) the magic returns at once, the widget
    says it is reading, and the helper thread draws it when the read ends."""
    from dataclasses import replace

    from trainwatch_lab.core.defaults import DEFAULTS
    from trainwatch_lab.notebook.magics import state_for

    store = tmp_path / "h.sqlite"
    _full_disk_store(store, time.time() - 60)
    monkeypatch.setenv(STORE_ENV, str(store))
    state = state_for(shell)
    monkeypatch.setattr(state, "defaults", replace(DEFAULTS, replay_wait_s=0.0))
    gate = threading.Event()
    real = Replay._read

    def held(self: Replay) -> None:  # the read starts only once the magic has returned
        gate.wait(60)
        real(self)

    monkeypatch.setattr(Replay, "_read", held)
    shell.run_line_magic("trainwatch", "--since 1h")
    replay = state.replay_view
    assert replay is not None and not replay.wait(0)
    assert "reading the recorded history" in replay.status.value
    assert replay.text().endswith("reading the recorded history…")
    gate.set()
    assert replay.wait(60) and replay.error is None
    assert "1 run ended" in replay.status.value and replay.charts["space"].points > 1


def test_the_replay_calls_bad_what_the_panel_s_cards_call_bad(tmp_path: Path) -> None:
    """One rule (core.record.why's Ending.badly) for the replay and the panel's cards: a
    kernel killed with SIGKILL and no cause seen ended badly; one shut down on request,
    though its manager's SIGKILL ended it, did not."""
    path = tmp_path / "h.sqlite"
    store = Store(str(path), role="t")
    store.register()
    end = time.time() - 60
    killed = {"pid": 8, "exit": {"code": None, "signal": "SIGKILL"}}
    asked = {**killed, "pid": 9, "requested": "shutdown", "asked_by": "client"}
    store.add_events(
        [
            Event(end - 10, "kernel-ended", "kernel python3", "ended", killed),
            Event(end, "kernel-ended", "kernel python3", "was shut down", asked),
        ]
    )
    store.close()
    replay = Replay(3600, path=str(path))
    try:
        assert replay.wait(60) and replay.error is None
        assert [e["badly"] for e in replay.recorded.endings] == [True, False]
        assert replay.endings.value.count("data-badly='1'") == 1
        assert "was shut down at" in replay.endings.value
        assert "data-level='warning'" in replay.status.value  # no cause, yet it died
    finally:
        replay.close()
