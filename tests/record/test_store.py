"""The store survives what nights do to it: SIGKILL at any point, its disk filling up, a
foreign or damaged file in its place. Real writer processes, real filesystems."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
from dataclasses import replace
from pathlib import Path

import pytest

from trainwatch_lab.core.defaults import DEFAULTS, MIB
from trainwatch_lab.core.model import PathState, Sample
from trainwatch_lab.core.record import Event, Recorder, Store, codec
from trainwatch_lab.core.record import store as store_module
from trainwatch_lab.core.record.maintain import maintain

ROOT = Path(__file__).resolve().parents[2]


def _integrity(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def test_codec_round_trip_keeps_gaps_and_exact_sizes() -> None:
    ts = [1_700_000_000.0 + i for i in range(300)]
    values = [float(4096 * (10_000 - 3 * i)) for i in range(300)]
    values[7] = float("nan")
    got_t, got_v = codec.decode(codec.encode(ts, values, "free_bytes"))
    assert got_t == ts
    assert got_v[7] != got_v[7]
    assert got_v[:7] == values[:7] and got_v[8:] == values[8:]
    noisy = [50 + 10 * ((i * 7919) % 13) / 13 for i in range(300)]
    _, back = codec.decode(codec.encode(ts, noisy, "util"))
    # 3 significant digits of the largest (59.2...): a step of 0.1, off by half of it at most
    assert max(abs(a - b) for a, b in zip(noisy, back, strict=True)) <= 0.05 + 1e-9


@pytest.mark.slow  # repeated writers killed at random moments, ~10 s
def test_sigkill_at_random_points_never_corrupts_and_keeps_every_flushed_point(
    tmp_path: Path,
) -> None:
    store = tmp_path / "state" / "history.sqlite"
    watched = tmp_path / "data"
    watched.mkdir()
    rng = random.Random(27)
    promised: list[float] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.record.writer", str(store), str(watched)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda p=proc, out=lines: out.extend(p.stdout), daemon=True
        )
        reader.start()
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:  # it has written at least once
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=30)
        assert lines, "the writer never flushed"
        promised += [float(x) for x in lines]
        assert _integrity(store) == "ok"
    reader_store = Store(str(store), role="check")
    reader_store.register()
    maintain(reader_store)  # folds what the killed writers left in `recent`
    assert _integrity(store) == "ok"
    key = f"path:{watched}:free_bytes"
    times, _ = reader_store.read([key], 0, 2e9)[key]
    kept = {round(t * 1000) for t in times}
    missing = [t for t in promised if round(t * 1000) not in kept]
    assert not missing, f"{len(missing)} flushed points lost, e.g. {missing[:3]}"
    assert not reader_store.con.execute("SELECT count(*) FROM recent").fetchone()[0]
    reader_store.close()


def test_writers_at_once_share_the_file_and_lose_nothing_they_flushed(tmp_path: Path) -> None:
    """Three recording processes (a server, an agent, a kernel) on one file at once, each
    flushing and folding every few ticks: none waits out the busy timeout, none loses what
    it flushed, and the file stays sound."""
    store = tmp_path / "history.sqlite"
    watched = tmp_path / "data"
    watched.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs, outputs = [], []
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.record.writer", str(store), str(watched)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        lines: list[str] = []
        threading.Thread(target=lambda p=proc, out=lines: out.extend(p.stdout), daemon=True).start()
        procs.append(proc)
        outputs.append(lines)
    deadline = time.monotonic() + 120
    while min(len(o) for o in outputs) < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert min(len(o) for o in outputs) >= 10, [len(o) for o in outputs]
    assert _integrity(store) == "ok"
    check = Store(str(store), readonly=True)
    key = f"path:{watched}:free_bytes"
    kept = {round(t * 1000) for t in check.read([key], 0, 2e9)[key][0]}
    check.close()
    promised = [float(x) for o in outputs for x in list(o)]
    assert not [t for t in promised if round(t * 1000) not in kept]


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _sample(t: float, path: str) -> Sample:
    return Sample(t=t, paths={path: PathState(path, exists=True, free_bytes=int(t) * 4096)})


def test_disk_full_pauses_with_a_note_and_resumes(loop_ext4, tmp_path: Path) -> None:
    disk = loop_ext4(size_mb=16)
    store = disk.mountpoint / "history.sqlite"
    defaults = replace(DEFAULTS, record_min_free_bytes=4 * MIB, record_block_points=5)
    clock = [1_000_000.0]
    recorder = Recorder(str(store), every=0.0, defaults=defaults, clock=lambda: clock[0])
    for i in range(3):
        recorder(_sample(clock[0] + i, "/w"))
    assert recorder.flush()
    filler = disk.mountpoint / "filler"
    with open(filler, "wb") as fh:  # leave ~2 MiB: under the floor
        fh.write(b"\0" * (_free(disk.mountpoint) - 2 * MIB))
    assert _free(disk.mountpoint) < 4 * MIB
    size_before = os.path.getsize(store)
    for i in range(3, 12):
        recorder(_sample(clock[0] + i, "/w"))  # never raises into the sampler
        assert recorder.flush() is False
    assert recorder.paused and "recording paused" in (recorder.note or "")
    shown = _sample(clock[0] + 12, "/w")
    recorder(shown)  # the next sample carries the note to the surfaces
    assert shown.notes["record"] == recorder.note
    assert os.path.getsize(store) == size_before
    filler.unlink()
    clock[0] += 60
    assert recorder.flush()
    assert not recorder.paused and recorder.note is None
    recorder.close()
    check = Store(str(store), readonly=True)
    times, _ = check.read(["path:/w:free_bytes"], 0, 2e9)["path:/w:free_bytes"]
    assert len(times) == 13  # what came during the pause was kept and written
    assert [e.kind for e in check.events(0, 2e9)] == ["recording-resumed"]
    check.close()


def test_sqlite_disk_full_error_pauses_instead_of_raising(loop_ext4) -> None:
    disk = loop_ext4(size_mb=8)
    store = disk.mountpoint / "history.sqlite"
    defaults = replace(DEFAULTS, record_min_free_bytes=0, record_block_points=10_000)
    recorder = Recorder(str(store), every=0.0, defaults=defaults)
    recorder(_sample(1_000_000.0, "/w"))
    assert recorder.flush()
    filler = disk.mountpoint / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (MIB, 4096, 512):  # to the last block
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                pass
    for i in range(1, 400):  # enough that a flush needs a new page
        sample = Sample(t=1_000_000.0 + i)
        sample.paths = {f"/w{j}": PathState(f"/w{j}", free_bytes=i * j) for j in range(50)}
        recorder(sample)
    assert recorder.flush() is False
    assert recorder.paused and "full" in (recorder.note or "")
    filler.unlink()
    assert recorder.flush()
    recorder.close()
    assert _integrity(store) == "ok"


@pytest.mark.parametrize("what", ["garbage", "foreign", "damaged"])
def test_a_file_that_is_not_our_store_is_moved_aside_never_overwritten(
    tmp_path: Path, what: str
) -> None:
    path = tmp_path / "history.sqlite"
    if what == "garbage":
        path.write_bytes(b"my precious notes\n" * 100)
    elif what == "foreign":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE mine (x)")
        con.execute("INSERT INTO mine VALUES (42)")
        con.commit()
        con.close()
    else:
        store = Store(str(path), role="t")
        store.register()
        store.add_events([])
        for i in range(200):
            store.con.execute("INSERT INTO series (key) VALUES (?)", (f"k:{i}:x" * 20,))
        store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        data = bytearray(path.read_bytes())
        data[4096:8192] = b"\xff" * 4096  # a whole page after the schema
        path.write_bytes(bytes(data))
    original = path.read_bytes()
    store = Store(str(path), role="t")
    moved = [
        p
        for p in tmp_path.iterdir()
        if ".moved-" in p.name and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(moved) == 1 and moved[0].read_bytes() == original
    events = store.events(0, 2e9)
    assert [e.kind for e in events] == ["store-moved"] and str(moved[0]) in events[0].text
    store.close()
    assert _integrity(path) == "ok"


def test_our_own_store_is_reopened_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    Store(str(path)).close()
    Store(str(path)).close()
    assert [p.name for p in tmp_path.iterdir() if ".moved-" in p.name] == []


OPEN_UNDER_FSIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # the -shm cannot grow: "disk I/O"
from trainwatch_lab.core.record import Store, StoreError
try:
    Store(sys.argv[1], role="t")
except StoreError as exc:
    print("StoreError:", exc)
else:
    print("opened")
"""


def test_a_healthy_store_stays_where_it_is_on_a_transient_error(tmp_path: Path) -> None:
    """A disk I/O error (a full disk, a file size limit) says nothing about the file: the
    history that explains why a run died is kept, and the open fails with a clear error."""
    path = tmp_path / "history.sqlite"
    store = Store(str(path), role="t")
    store.register()
    store.add_events([Event(1.0, "run-ended", "train.py", "train.py ended")])
    store.close()
    original = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", OPEN_UNDER_FSIZE_LIMIT, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("StoreError:"), done.stdout + done.stderr
    assert [p.name for p in tmp_path.iterdir() if ".moved-" in p.name] == []
    assert path.read_bytes() == original
    store = Store(str(path), readonly=True)
    assert [e.kind for e in store.events(0, 2e9)] == ["run-ended"]
    store.close()


def test_a_flush_that_fails_after_its_events_committed_writes_them_once(tmp_path: Path) -> None:
    """The events' transaction committed, the values' one failed: the next flush writes the
    values, never the events again ("run ended" twice would be two runs)."""
    path = tmp_path / "history.sqlite"
    recorder = Recorder(str(path), every=0.0)
    now = time.time()
    recorder.add_event(Event(now, "recording-started", "t", "a first event makes the file"))
    assert recorder.flush()
    other = sqlite3.connect(path)  # another connection breaks the table the values go to
    other.executescript(
        "CREATE TABLE doomed (x); CREATE TRIGGER breaks AFTER INSERT ON recent "
        "BEGIN INSERT INTO doomed VALUES (1); END; DROP TABLE doomed;"
    )
    recorder(_sample(now, "/w"))
    recorder.add_event(Event(now, "run-ended", "train.py", "train.py ended"))
    assert recorder.flush() is False and "no such table" in (recorder.note or "")
    other.executescript("DROP TRIGGER breaks;")
    other.close()
    assert recorder.flush()
    recorder.close()
    check = Store(str(path), readonly=True)
    assert [e.kind for e in check.events(0, 2e9)] == ["recording-started", "run-ended"]
    assert len(check.read(["path:/w:free_bytes"], 0, 2e9)["path:/w:free_bytes"][0]) == 1
    check.close()


@pytest.mark.parametrize("moment", ["created-empty", "schema-uncommitted", "commits-mid-look"])
def test_a_reader_racing_the_writer_that_creates_the_store_sees_no_history_yet(
    tmp_path: Path, moment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's recorded endpoints, `history` and a kernel's past read the file while its
    first writer may be creating it: an empty file, or the schema in an open transaction.
    That is a history with nothing in it yet, not "another program's file" (seen as a flake
    of test_the_server_records_with_nobody_looking, and in CI of
    test_recorded_queries_run_one_at_a_time_off_the_hub_s_executor: the writer committed
    between the reader's look at the mark and its look at the tables); and the writer then
    keeps the file."""
    path = tmp_path / "history.sqlite"
    creator = None
    if moment == "created-empty":
        path.touch()
    else:
        creator = sqlite3.connect(path, isolation_level=None)
        creator.execute("BEGIN IMMEDIATE")
        creator.execute("CREATE TABLE half (x)")
    if moment == "commits-mid-look":
        assert creator is not None
        for statement in store_module.SCHEMA.split(";"):
            creator.execute(statement)
        creator.execute(f"PRAGMA application_id = {store_module.APPLICATION_ID}")
        connect = Store._connect
        seen: list[str] = []

        def connect_and_commit_after_its_first_statement(
            self: Store, target: str, uri: bool = False
        ) -> sqlite3.Connection:
            con = connect(self, target, uri)

            def traced(statement: str) -> None:
                if not statement.startswith("--"):  # not a pragma function's inner statement
                    seen.append(statement)
                if len(seen) == 2 and creator.in_transaction:  # the reader's second look
                    creator.execute("COMMIT")

            con.set_trace_callback(traced)
            return con

        monkeypatch.setattr(Store, "_connect", connect_and_commit_after_its_first_statement)
    reader = Store(str(path), readonly=True)
    monkeypatch.undo()
    assert creator is None or moment != "commits-mid-look" or not creator.in_transaction
    try:
        assert reader.read(["path:/data:avail_bytes"], 0, 2e9) == {}
        assert reader.events(0, 2e9) == []
    finally:
        reader.close()
    if creator is not None:
        if creator.in_transaction:
            creator.execute("ROLLBACK")
        creator.close()
    writer = Store(str(path), role="t")
    try:
        assert writer.notes == []  # nothing moved aside
    finally:
        writer.close()
    assert not [
        p
        for p in tmp_path.iterdir()
        if p.name != path.name
        and "history" in p.name
        and "-wal" not in p.name
        and "-shm" not in p.name
    ]


def test_the_size_of_a_young_history_counts_its_wal(tmp_path: Path) -> None:
    """Its WAL is most of a young history's size: ``used_bytes`` (the size cap, every size
    figure) counts it (issue 35, item 12: no figure mentioned the WAL)."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    try:
        store.register()
        store.add_events([Event(float(i), "process-seen", "x", "x" * 200) for i in range(200)])
        wal = os.path.getsize(tmp_path / "h.sqlite-wal")
        pages = store.con.execute("PRAGMA page_count").fetchone()[0]
        free = store.con.execute("PRAGMA freelist_count").fetchone()[0]
        size = store.con.execute("PRAGMA page_size").fetchone()[0]
        assert wal > 0
        assert store.used_bytes() == (pages - free) * size + wal
    finally:
        store.close()


def _summed(store: Store, key: str, since: float, until: float) -> tuple[object, ...]:
    """What ``read`` gives, summed up as the table of ``history`` shows it."""
    ts, vs = store.read([key], since, until)[key]
    real = [v for v in vs if v == v]
    return (len(ts), ts[0], min(real), sum(real) / len(real), max(real), real[-1])


def test_a_summary_from_block_aggregates_is_what_reading_every_point_gives(
    tmp_path: Path,
) -> None:
    """Whole blocks are summed up from what was stored with them, undecoded; blocks that
    overlap (a second writer, a thinned tier, recent rows) and the window's two ends are
    decoded and merged as ``read`` does: the same numbers (issue 35, item 12: a week's
    table decoded every point, 3.55 s)."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    key = "disk:sda:util"
    t0 = 1_800_000_000.0
    ts = [t0 + i for i in range(6000)]
    vs = [float(i % 97) if i % 500 else float("nan") for i in range(6000)]
    for i in range(0, 6000, 600):
        store.close_blocks({key: (ts[i : i + 600], vs[i : i + 600])})
    # a thinned block over part of the same time, and a second writer's overlapping block
    store.close_blocks({key: ([t0 + 30.5 + 60 * i for i in range(20)], [50.0] * 20)}, tier=1)
    store.close_blocks({key: ([t0 + 3000.25 + i for i in range(100)], [200.0] * 100)}, writer=99)
    store.write_recent(
        {key: ([t0 + 6000 + i for i in range(10)], [-1.0] * 10)}, t0 + 6000, t0 + 6009
    )
    try:
        for since, until in ((t0 - 10, t0 + 7000), (t0 + 650.5, t0 + 5400.5), (t0, t0 + 6005)):
            got = store.summary(key, since, until)
            assert got is not None
            assert (got.points, got.first, got.lo, got.mean, got.hi, got.last) == pytest.approx(
                _summed(store, key, since, until)
            )
        store.decoded = 0
        store.summary(key, t0 + 650.5, t0 + 5400.5)
        assert store.decoded <= 4 * 600  # the two ends and the second writer's neighbours
        assert store.summary(key, t0 + 9000, t0 + 9999) is None
    finally:
        store.close()


def test_a_recorder_closed_while_it_starts_waits_for_its_thread_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close()`` on one thread while ``start()`` on another had made the recorder's thread
    and not yet started it: "cannot join thread before it is started" (seen at a server's
    teardown)."""
    from trainwatch_lab.core.record import recorder as recorder_module

    in_start, go = threading.Event(), threading.Event()

    class SlowToStart(threading.Thread):
        def start(self) -> None:
            in_start.set()
            go.wait(60)
            super().start()

    slow = types.SimpleNamespace(**{**vars(threading), "Thread": SlowToStart})
    monkeypatch.setattr(recorder_module, "threading", slow)  # the recorder's own name only
    rec = Recorder(str(tmp_path / "history.sqlite"), every=0.0)
    starter = threading.Thread(target=rec.start)
    starter.start()
    assert in_start.wait(60)
    errors: list[BaseException] = []

    def close() -> None:
        try:
            rec.close()
        except BaseException as exc:
            errors.append(exc)

    closer = threading.Thread(target=close)
    closer.start()
    closer.join(2.0)  # the old code raised here at once; the new one waits for the start
    go.set()
    starter.join(60)
    closer.join(60)
    assert errors == [] and not closer.is_alive()
