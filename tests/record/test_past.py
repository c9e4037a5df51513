"""Issue 23 item 3: a sampler that starts watching in the middle of a fill judges it as the
one that watched it begin, from the recorded free space (core.record.past), on a real tmpfs
with a real Recorder and the samplers' injected clock."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import PathState, Sample
from trainwatch_lab.core.record import Recorder
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.monitor import make_sampler

MIB = 2**20
T0 = 1_800_000_000.0
FILL_STARTS = 5  # tick of the first MiB written (one a second)
LATE = 26  # the second sampler's first tick: the first has warned since tick 23
PATIENCE_S = 30.0  # a woken thread's flush, on a loaded machine: well under this


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def filling(sample: Sample) -> set[tuple[str, str]]:
    return {(a.severity, a.subject) for a in sample.warnings if a.code == "disk-filling"}


def new_sampler(path: Path, clock: Clock, store: str) -> Sampler:
    return make_sampler(
        [str(path)], process=False, probe=False, gpu=False, clock=clock, past_store=store
    )


def fill_until(first: Sampler, recorder: Recorder, clock: Clock, out: Path, tick: int) -> None:
    """Ticks 0 .. tick - 1 of the first sampler: 1 MiB appended a second from FILL_STARTS,
    the recorder flushing every 10 ticks (its thread's pace), the last time 2 ticks ago."""
    for i in range(tick):
        write(out, i)
        clock.t = T0 + i
        first.tick()
        if i % 10 == tick % 10 - 2:
            assert recorder.flush()


def eventually(check: Callable[[], bool], patience: float = PATIENCE_S) -> bool:
    deadline = time.monotonic() + patience
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def write(out: Path, i: int) -> None:
    if i >= FILL_STARTS:
        with open(out, "ab") as fh:
            fh.write(b"\1" * MIB)


def test_a_sampler_started_mid_fill_warns_at_once_as_the_first(tmpfs_mount, tmp_path) -> None:
    """Measured before: a notebook started 6 s into a fill of a 40 MiB tmpfs missed the
    critical disk-filling the panel showed for about 10 s. Now its first judged tick has the
    first sampler's verdict, and so has every tick after it."""
    m = tmpfs_mount("40m")
    run = m.path / "run"
    run.mkdir()
    store = str(tmp_path / "history.sqlite")
    clock = Clock()
    first = new_sampler(m.path, clock, store)  # the server's: it records
    recorder = Recorder(store, role="jupyter-server", every=0.0, clock=clock)
    first.subscribe(recorder)
    late = blind = None
    try:
        fill_until(first, recorder, clock, run / "out.bin", LATE)
        late = new_sampler(run, clock, store)  # the notebook's: another path on that tmpfs
        blind = new_sampler(run, clock, "")  # as before: no recorded past
        verdicts = []
        for i in range(LATE, LATE + 12):
            write(run / "out.bin", i)
            clock.t = T0 + i
            a, b, c = first.tick(), late.tick(), blind.tick()
            verdicts.append((filling(a), filling(b), filling(c)))
            if i % 10 == LATE % 10 - 2:
                recorder.flush()
        reads = late.evaluate.past.reads  # type: ignore[union-attr]
    finally:
        recorder.close()
        for s in (first, late, blind):
            if s is not None:
                s.close()
    (at_first, *_) = verdicts
    assert at_first[0] == {("critical", str(m.path))}, verdicts  # the panel warns by now
    assert at_first[1] == {("critical", str(run))}, verdicts
    assert at_first[2] == set(), verdicts  # its own second of history: no trend
    for a, b, _ in verdicts:  # the same verdict at every tick
        assert {s for s, _ in a} == {s for s, _ in b}, verdicts
    assert 1 <= reads <= 12 // 5 + 1  # once per fill_past_refresh_s, not every tick


def test_while_space_falls_each_sample_is_written_at_once(tmpfs_mount, tmp_path) -> None:
    """Measured before: a notebook started mid-fill lagged the panel ~15 s, reading the
    recorded past only up to the recorder's last flush (every record_flush_s, 10 s). Now the
    recorder's own thread (its timer an hour off here, so only the early flush can write)
    writes each sample of a fill before the next tick, and a sampler started at any tick
    judges it as the writer does from its first one."""
    m = tmpfs_mount("40m")
    run = m.path / "run"
    run.mkdir()
    store = str(tmp_path / "history.sqlite")
    clock = Clock()
    first = new_sampler(m.path, clock, store)
    slow = replace(DEFAULTS, record_flush_s=3600.0)
    recorder = Recorder(store, role="jupyter-server", every=0.0, clock=clock, defaults=slow)
    first.subscribe(recorder)
    recorder.start()
    late = None
    try:
        for i in range(LATE):
            write(run / "out.bin", i)
            clock.t = T0 + i
            done = recorder.flushes
            first.tick()
            if i >= FILL_STARTS:  # 1 MiB of a 40 MiB tmpfs gone: written before the next tick
                assert eventually(lambda done=done: recorder.flushes > done), (i, done)
        assert recorder.flushes <= LATE - FILL_STARTS  # none before the fill began
        late = new_sampler(run, clock, store)
        write(run / "out.bin", LATE)
        clock.t = T0 + LATE
        a, b = first.tick(), late.tick()
    finally:
        recorder.close()
        for s in (first, late):
            if s is not None:
                s.close()
    assert filling(a) == {("critical", str(m.path))}
    assert filling(b) == {("critical", str(run))}


def test_a_disk_that_holds_still_keeps_the_usual_flush_pace(tmpfs_mount, tmp_path) -> None:
    """An almost full disk that holds still asks for no early flush (one at most, when its
    warning is raised): the store stays as compact as before; writing again asks at once."""
    m = tmpfs_mount("40m")
    (m.path / "big.bin").write_bytes(b"\1" * (37 * MIB))  # 3 MiB left: almost full
    clock = Clock()
    sampler = new_sampler(m.path, clock, "")
    recorder = Recorder(str(tmp_path / "history.sqlite"), every=0.0, clock=clock)
    sampler.subscribe(recorder)
    wanted = []
    try:
        for i in range(27):
            clock.t = T0 + i
            if i >= 25:
                write(m.path / "more.bin", FILL_STARTS)
            sample = sampler.tick()
            wanted.append(recorder.flush_wanted)
            if recorder.flush_wanted:  # what the thread does when woken
                assert recorder.flush()
                assert not recorder.flush_wanted
    finally:
        recorder.close()
        sampler.close()
    assert any(a.code == "disk-almost-full" for a in sample.warnings)
    assert sum(wanted[:25]) <= 1, wanted  # still: at most the warning's raise
    assert all(wanted[25:]), wanted  # 1 MiB a tick of the ~3 left: each tick at once


def test_no_store_or_one_not_ours_is_no_past_and_is_left_alone(tmpfs_mount, tmp_path) -> None:
    """A store path with no file, a file that is no database, another program's database
    and our history that no writer has open: the sampler judges from its own history, as
    before, and creates nothing beside them (no -wal or -shm), moves and changes nothing."""
    m = tmpfs_mount("40m")
    absent = tmp_path / "absent" / "history.sqlite"
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database\n" * 100)
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    closed = tmp_path / "closed.sqlite"  # ours, with its recorder gone: nobody records
    recorder = Recorder(str(closed), every=0.0, clock=Clock())
    first = new_sampler(m.path, Clock(), "")
    first.subscribe(recorder)
    first.tick()
    assert recorder.flush()
    recorder.close()
    first.close()
    before = {p: p.read_bytes() for p in (garbage, other, closed)}
    listing = sorted(os.listdir(tmp_path))
    for store in (absent, garbage, other, closed):
        clock = Clock()
        sampler, today = new_sampler(m.path, clock, str(store)), new_sampler(m.path, clock, "")
        try:
            for i in range(4):
                clock.t = T0 + i
                sample, expected = sampler.tick(), today.tick()
                fill = sample.paths[str(m.path)].fill
                assert fill == expected.paths[str(m.path)].fill
                assert fill.trend == ("measuring" if i < 2 else "steady")
                assert "advice" not in sample.notes
        finally:
            sampler.close()
            today.close()
    assert sorted(os.listdir(tmp_path)) == listing and not absent.parent.exists()
    assert {p: p.read_bytes() for p in (garbage, other, closed)} == before


def test_only_readings_of_the_same_filesystem_and_size_are_past(tmp_path) -> None:
    """Sizes are recorded in 4 KiB steps, so a size that is no multiple of 4 KiB still
    matches; a directory under a quota (its own size) on the same mount, or another mount,
    is not this filesystem's free space. Read once per fill_past_refresh_s, at most."""
    from trainwatch_lab.core.record.past import RecordedPast
    from trainwatch_lab.core.storage.mounts import mount_for_path, read_mounts

    store = str(tmp_path / "history.sqlite")
    mount = mount_for_path(str(tmp_path), read_mounts()).mountpoint
    size, quota = 10**10 + 1000, 5 * 10**9
    recorder = Recorder(store, every=0.0)
    for i in range(30):
        paths = {
            str(tmp_path / "a"): PathState("a", total_bytes=size, avail_bytes=9e9 - i * MIB),
            str(tmp_path / "q"): PathState("q", total_bytes=quota, avail_bytes=1e9 + i * MIB),
            "/proc/x": PathState("/proc/x", total_bytes=size, avail_bytes=1.0),
        }
        recorder(Sample(t=T0 + i, paths=paths))
    assert recorder.flush()
    past = RecordedPast(store)
    ts, vs = past((mount, size), T0 + 10, T0 + 20, T0 + 30)
    assert ts == [T0 + i for i in range(10, 20)]
    assert [round(v) for v in vs] == [round((9e9 - i * MIB) / 4096) * 4096 for i in range(10, 20)]
    assert (
        past((mount, quota), T0, T0 + 30, T0 + 30)[1][-1] == round((1e9 + 29 * MIB) / 4096) * 4096
    )
    assert past((mount, 123 * 4096), T0, T0 + 30, T0 + 30) == ([], [])  # no such size
    assert past.reads == 3  # one per filesystem asked about
    assert past((mount, size), T0, T0 + 30, T0 + 34)[0][0] == T0  # from the cache
    assert past.reads == 3
    recorder.close()


def test_the_servers_sampler_reads_the_history_it_records(tmp_path) -> None:
    """The Jupyter server's sampler gets the reader of its own recording (record_path), as
    a notebook's gets the machine's: both judge a fill from the same evidence."""
    from trainwatch_lab.server.config import ServerSettings
    from trainwatch_lab.server.hub import Hub

    store = str(tmp_path / "server.sqlite")
    config = ServerSettings(record_path=store, gpu=False, probe=False, watch_processes=False)
    hub = Hub(config)
    try:
        hub.sampler = hub._create_and_start()
        assert hub.sampler.evaluate.past.path == store  # type: ignore[union-attr]
    finally:
        hub.close_now()
    kernel = make_sampler([], process=False, probe=False, gpu=False)
    assert kernel.evaluate.past.path == os.environ["TRAINWATCH_STORE"]  # type: ignore[union-attr]
    kernel.close()
