"""The recorded history: one SQLite file (stdlib ``sqlite3``, WAL) that several writers share.

Why it is safe to kill: every write is one short transaction in WAL mode with
``synchronous=NORMAL``, so a writer killed at any point (SIGKILL) leaves the last committed
state; what it had not flushed yet (``Defaults.record_flush_s``, 10 s) is all it loses.
Several processes (the Jupyter server, ``serve --record``, ``watch --record``, the ``run``
wrapper) write at once: each has its own row in ``writers``, waits on the others at most
``record_busy_timeout_s`` and never holds a transaction open between flushes.

A file at the store's path that is no SQLite database, another program's database, or a
damaged one (SQLite says corrupt or not a database, or ``quick_check`` fails) is moved aside
(``<name>.moved-<time>``, its -wal and -shm with it) and the move is the first event of the
new store: never overwritten, never opened blindly. Any other error (locked, disk I/O, no
file handles left) says nothing about the file: a StoreError, and the file stays. The
directory must be this user's and writable by no one else, the file is 0600: the history
holds command lines.

Tables: ``series`` (one row per ``kind:name:field``), ``blocks`` (a series' closed blocks,
codec-encoded, per tier: 0 as recorded, 1 thinned), ``recent`` (a writer's values since its
last closed block, one row per flush, folded into blocks when the block closes or, after a
crash, by the next writer), ``events`` and ``writers``.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..defaults import DEFAULTS, Defaults
from ..private import untrusted
from . import codec
from .facts import told
from .location import real_directory

log = logging.getLogger(__name__)

APPLICATION_ID = 0x54574C42  # "TWLB": PRAGMA application_id, our mark on the file
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE series (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE writers (
    id INTEGER PRIMARY KEY, role TEXT NOT NULL, pid INTEGER NOT NULL, start TEXT,
    started REAL NOT NULL, seen REAL NOT NULL);
CREATE TABLE blocks (
    id INTEGER PRIMARY KEY, series INTEGER NOT NULL, tier INTEGER NOT NULL, t0 REAL NOT NULL,
    t1 REAL NOT NULL, writer INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL,
    lo REAL, hi REAL, total REAL, finite INTEGER, last REAL);
CREATE UNIQUE INDEX blocks_key ON blocks (series, tier, t0, writer);
CREATE INDEX blocks_age ON blocks (tier, t1);
CREATE TABLE recent (
    writer INTEGER NOT NULL, t0 REAL NOT NULL, t1 REAL NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (writer, t0)) WITHOUT ROWID;
CREATE TABLE events (
    id INTEGER PRIMARY KEY, t REAL NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL,
    text TEXT NOT NULL, data TEXT, writer INTEGER);
CREATE INDEX events_t ON events (t);
"""

# a block's own summary of its values (min, max, sum, count and last of the non-NaN ones),
# so a summary of a long window reads whole blocks without decoding them; NULL in blocks
# an older writer made (they are decoded), added to a file an older version created
AGGREGATES = ("lo", "hi", "total", "finite", "last")
Columns = dict[str, tuple[list[float], list[float]]]  # series key -> (times, values)


@dataclass(slots=True)
class Summary:
    """A series over a window: points (NaN included), the first time, and the min, mean,
    max and last of its values (None when all are NaN)."""

    points: int = 0
    first: float = float("inf")
    lo: float | None = None
    hi: float | None = None
    total: float = 0.0
    finite: int = 0
    last_t: float = float("-inf")
    last: float | None = None

    @property
    def mean(self) -> float | None:
        return self.total / self.finite if self.finite else None

    def add(self, t0: float, t1: float, n: int, agg: Sequence[Any]) -> None:
        lo, hi, total, finite, last = agg
        self.points += n
        self.first = min(self.first, t0)
        if finite:
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)
            self.total += total
            self.finite += finite
            if t1 >= self.last_t:
                self.last_t, self.last = t1, last


def aggregate(vs: Sequence[float]) -> tuple[Any, ...]:
    """``AGGREGATES`` of a block's values."""
    real = [v for v in vs if v == v]
    if not real:
        return (None, None, 0.0, 0, None)
    return (min(real), max(real), math.fsum(real), len(real), real[-1])


class StoreError(Exception):
    """The store cannot be opened (a directory it cannot create, a file it cannot move)."""


@dataclass(slots=True)
class Event:
    """One thing that happened (see ARCHITECTURE.md's event kinds in core/record)."""

    t: float
    kind: str
    subject: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "kind": self.kind,
            "subject": self.subject,
            "text": self.text,
            "data": self.data,
        }


def _identity() -> str | None:
    """This process's start ticks (with its pid, who it is: a reused pid is someone else)."""
    from ..processes.discovery import stat_fields

    fields = stat_fields(os.getpid(), "/proc")  # our own process: our own /proc
    return str(fields[1]) if fields else None


def is_ours(path: str) -> str | None:
    """None when ``path`` is absent, empty or our store; else why it is not (one phrase)."""
    try:
        if os.path.getsize(path) == 0:
            return None
    except FileNotFoundError:
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not head.startswith(b"SQLite format 3\x00"):
        return "not an SQLite database"
    con: sqlite3.Connection | None = None
    try:
        con = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, timeout=DEFAULTS.record_busy_timeout_s
        )
        app, tables = _mark(con)
        if app != APPLICATION_ID:
            return None if (app == 0 and tables == 0) else "another program's database"
        check = con.execute("PRAGMA quick_check").fetchone()[0]
        return None if check == "ok" else f"damaged ({check})"
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            return f"damaged ({exc})"
        # locked, disk I/O, no file handle left: nothing known about the file, which may
        # be the very history that explains why a run died of a full disk; never moved
        raise StoreError(f"cannot open {path}: {exc}") from None
    finally:
        if con is not None:
            con.close()


def _mark(con: sqlite3.Connection) -> tuple[int, int]:
    """Our mark on the file and how many tables it has, read in one statement: one snapshot,
    so a first writer committing its schema between two looks cannot make our own file
    read as "another program's" (a mark of 0 with tables)."""
    row = con.execute(
        "SELECT (SELECT application_id FROM pragma_application_id),"
        " (SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    return int(row[0]), int(row[1])


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file itself is bad (corrupt, or not a database), as opposed
    to a moment's trouble reading it (locked, I/O error, out of file handles, disk full)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is None:  # 3.10: SQLite's own messages for those two codes
        return str(exc) in ("database disk image is malformed", "file is not a database")
    return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def place(path: str, readonly: bool = False) -> str:
    """``path`` with its directory resolved (core.record.location.real_directory), or
    StoreError: a directory on a share, or reached through a symlink onto one, is never
    touched (a hung share would hold the caller in D state), nor one another user may
    change; a writer also needs the real directory to be its own (``untrusted``)."""
    directory, name = os.path.split(os.path.abspath(path))
    real, why = real_directory(directory)
    if real is None:
        raise StoreError(f"refusing to {'read' if readonly else 'record'} there: {why}")
    return os.path.join(real, name)


def _private(path: str) -> None:
    """Refuse a directory or file another user controls (it could read the history's
    commands or swap it); create the file 0600 (SQLite gives its -wal and -shm the file's
    mode) and tighten an existing one of ours. Nothing here follows a symlink: the file,
    its -wal and -shm are opened with O_NOFOLLOW and changed through that descriptor."""
    why = untrusted(os.path.dirname(path))
    if why is not None:
        raise StoreError(f"refusing to record there: {why}")
    _tighten(path, create=True)
    for suffix in ("-wal", "-shm"):
        _tighten(path + suffix, create=False)


def _tighten(path: str, create: bool) -> None:
    """Open ``path`` without following a symlink (made 0600 when ``create``), refuse one
    that is not our regular file, and make it 0600."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_CREAT if create else 0), 0o600)
    except FileNotFoundError:
        if create:
            raise StoreError(f"cannot open {path}: no such directory") from None
        return  # SQLite makes it with the file's mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"refusing to record in {path}: it is a symbolic link") from None
        raise StoreError(f"cannot open {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"refusing to record in {path}: it is not a regular file")
        if st.st_uid != os.geteuid():
            raise StoreError(f"refusing to record in {path}: it belongs to uid {st.st_uid}")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def move_aside(path: str, why: str) -> str:
    """Rename ``path`` (and its -wal/-shm) out of the way; the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = f"{path}.moved-{stamp}-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.rename(path + suffix, target + suffix)
    log.warning("trainwatch: %s at %s was moved to %s; a new history starts", why, path, target)
    return target


class Store:
    """One connection to the history file, for one thread at a time (a lock guards it)."""

    def __init__(
        self, path: str, role: str = "reader", defaults: Defaults = DEFAULTS, readonly: bool = False
    ) -> None:
        path = place(path, readonly)
        self.path = path
        self.role = role
        self.defaults = defaults
        self.notes: list[str] = []
        self._lock = threading.RLock()
        self._series: dict[str, int] = {}
        self.writer_id: int | None = None
        self.decoded = 0  # points decoded by read() so far: what a query's budget counts
        moved = None
        if readonly:
            if not os.path.exists(path):
                raise StoreError(f"no recorded history at {path}")
            self.con = self._connect(f"file:{path}?mode=ro", uri=True)
            try:
                app, tables = _mark(self.con)
            except sqlite3.DatabaseError as exc:
                self.con.close()
                raise StoreError(f"{path} is no trainwatch history ({exc})") from None
            if app == 0 and tables == 0:
                # its first writer is creating it (an empty file, or the schema in a
                # transaction not yet committed): a history with nothing in it yet
                self.con.close()
                self.con = self._connect(":memory:")
                self._create_schema()
                return
            if app != APPLICATION_ID:
                self.con.close()
                raise StoreError(f"{path} is no trainwatch history (another program's file)")
            return
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {os.path.dirname(path)}: {exc.strerror}") from None
        _private(path)
        why = is_ours(path)
        if why is not None:
            try:
                moved = move_aside(path, why)
            except OSError as exc:
                raise StoreError(f"{path} is {why} and cannot be moved: {exc.strerror}") from None
            self.notes.append(f"{path} was {why}: moved to {moved}")
        self.con = self._connect(path)
        self._initialise()
        if moved is not None:
            self.add_events([Event(time.time(), "store-moved", path, self.notes[-1])])

    def _connect(self, target: str, uri: bool = False) -> sqlite3.Connection:
        con = sqlite3.connect(
            target,
            uri=uri,
            timeout=self.defaults.record_busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        con.execute(f"PRAGMA busy_timeout = {int(self.defaults.record_busy_timeout_s * 1000)}")
        return con

    def _initialise(self) -> None:
        con = self.con
        # outside a transaction, before the first table: auto_vacuum can only be chosen for
        # an empty file (a no-op on an existing one), and only incremental vacuum gives the
        # pages of dropped history back to the filesystem
        con.execute("PRAGMA auto_vacuum = INCREMENTAL")
        con.execute("BEGIN IMMEDIATE")
        try:
            if con.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                self._create_schema()
            have = {r[1] for r in con.execute("PRAGMA table_info(blocks)")}
            for column in AGGREGATES:
                if column not in have:  # a file an older version made
                    kind = "INTEGER" if column == "finite" else "REAL"
                    con.execute(f"ALTER TABLE blocks ADD COLUMN {column} {kind}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
        con.execute(
            "PRAGMA journal_size_limit = 4194304"
        )  # the WAL shrinks back after a checkpoint

    def _create_schema(self) -> None:
        for statement in SCHEMA.strip().split(";"):
            if statement.strip():
                self.con.execute(statement)
        self.con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self.con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- writers ---------------------------------------------------------------------
    def register(self) -> int:
        """This process as a writer (the pid and its start, so a dead one can be told)."""
        now = time.time()
        with self._lock:
            cur = self.con.execute(
                "INSERT INTO writers (role, pid, start, started, seen) VALUES (?, ?, ?, ?, ?)",
                (self.role, os.getpid(), _identity(), now, now),
            )
            self.writer_id = int(cur.lastrowid or 0)
        return self.writer_id

    def series_id(self, key: str) -> int:
        """The id of a series key, created when new (inside the caller's transaction)."""
        sid = self._series.get(key)
        if sid is None:
            self.con.execute("INSERT OR IGNORE INTO series (key) VALUES (?)", (key,))
            sid = self.con.execute("SELECT id FROM series WHERE key = ?", (key,)).fetchone()[0]
            self._series[key] = sid
        return sid

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    # -- writing ---------------------------------------------------------------------
    def write_recent(self, columns: Columns, t0: float, t1: float) -> None:
        """One flush: the values since the last one, as a ``recent`` row of this writer."""
        with self.transaction():
            payload = _pack(self, columns)
            self.con.execute(
                "INSERT OR REPLACE INTO recent (writer, t0, t1, data) VALUES (?, ?, ?, ?)",
                (self.writer_id, t0, t1, payload),
            )
            self.con.execute("UPDATE writers SET seen = ? WHERE id = ?", (t1, self.writer_id))

    def close_blocks(self, columns: Columns, writer: int | None = None, tier: int = 0) -> None:
        """Whole blocks of ``writer`` (this one by default): written, and its recent rows up
        to their end folded away, in one transaction."""
        writer = self.writer_id if writer is None else writer
        with self.transaction():
            self._insert_blocks(columns, writer, tier)
            ends = [ts[-1] for ts, _ in columns.values() if ts]
            if ends:
                self.con.execute(
                    "DELETE FROM recent WHERE writer = ? AND t1 <= ?", (writer, max(ends))
                )

    def _insert_blocks(self, columns: Columns, writer: int | None, tier: int) -> None:
        rows = []
        for key, (ts, vs) in columns.items():
            if not ts:
                continue
            data = codec.encode(ts, vs, key.rsplit(":", 1)[-1])
            agg = aggregate(codec.decode(data)[1])  # of the values as stored (quantised)
            rows.append(
                (self.series_id(key), tier, ts[0], ts[-1], writer or 0, len(ts), data, *agg)
            )
        self.con.executemany(
            "INSERT OR REPLACE INTO blocks (series, tier, t0, t1, writer, n, data, "
            f"{', '.join(AGGREGATES)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def add_events(self, events: Sequence[Event]) -> int:
        """Record ``events`` in one transaction, less those another writer already told
        (core.record.facts: one event per fact per machine); the number recorded."""
        if not events:
            return 0
        kept = 0
        with self.transaction():
            for e in events:
                if told(self.con, self.writer_id, e.t, e.kind, e.subject, e.data):
                    continue
                self.con.execute(
                    "INSERT INTO events (t, kind, subject, text, data, writer) "
                    "VALUES (?,?,?,?,?,?)",
                    (
                        e.t,
                        e.kind,
                        e.subject,
                        e.text,
                        json.dumps(e.data) if e.data else None,
                        self.writer_id,
                    ),
                )
                kept += 1
        return kept

    # -- reading ---------------------------------------------------------------------
    def keys(self, pattern: str | None = None) -> list[str]:
        """Series keys recorded, optionally those matching a SQL GLOB (``disk:*:util``)."""
        with self._lock:
            sql, args = "SELECT key FROM series", ()
            if pattern:
                sql, args = sql + " WHERE key GLOB ?", (pattern,)
            return [r[0] for r in self.con.execute(sql + " ORDER BY key", args)]

    def read(self, keys: Iterable[str], since: float, until: float) -> Columns:
        """Every recorded point of ``keys`` in ``[since, until]``: the thinned tier where
        only it is left, the recorded one elsewhere, and what writers flushed since their
        last block; sorted by time, one point per millisecond."""
        out: Columns = {}
        with self._lock:
            ids = {}
            for key in keys:
                row = self.con.execute("SELECT id FROM series WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    ids[row[0]] = key
            recent = self._recent(set(ids), since, until)
            for sid, key in ids.items():
                points: dict[int, tuple[int, float, float]] = {}
                for tier, data in self.con.execute(
                    "SELECT tier, data FROM blocks WHERE series = ? AND t0 <= ? AND t1 >= ? "
                    "ORDER BY tier DESC, t0",
                    (sid, until, since),
                ):
                    ts, vs = codec.decode(data)
                    self.decoded += len(ts)
                    _merge(points, ts, vs, tier, since, until)
                for ts, vs in recent.get(sid, []):
                    _merge(points, ts, vs, 0, since, until)
                order = sorted(points)
                out[key] = ([points[k][1] for k in order], [points[k][2] for k in order])
        return out

    def summary(self, key: str, since: float, until: float) -> Summary | None:
        """``key`` over ``[since, until]`` as ``read`` would give it, summed up (None
        without a point): a block wholly inside the window that overlaps nothing else of
        the series (another writer's, another tier's, a recent row) is taken from its
        aggregates, undecoded; the rest is decoded and merged as ``read`` does. A week of
        a series is then the few blocks at its two ends (``history --since 7d``)."""
        with self._lock:
            row = self.con.execute("SELECT id FROM series WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            sid = row[0]
            have = self._has_aggregates()
            cols = ", ".join(AGGREGATES) if have else ", ".join(["NULL"] * len(AGGREGATES))
            blocks = self.con.execute(
                f"SELECT tier, t0, t1, n, data, {cols} FROM blocks "
                "WHERE series = ? AND t0 <= ? AND t1 >= ? ORDER BY t0",
                (sid, until, since),
            ).fetchall()
            recent = self._recent({sid}, since, until).get(sid, [])
        spans = sorted([(b[1], b[2]) for b in blocks] + [(ts[0], ts[-1]) for ts, _ in recent if ts])
        out = Summary()
        points: dict[int, tuple[int, float, float]] = {}
        reach = float("-inf")  # the latest end of the spans before this one
        ends = {}
        for i, (t0, t1) in enumerate(spans):
            after = spans[i + 1][0] if i + 1 < len(spans) else float("inf")
            ends.setdefault((t0, t1), []).append(reach >= t0 or after <= t1)
            reach = max(reach, t1)
        for tier, t0, t1, n, data, *agg in blocks:
            alone = not ends[(t0, t1)].pop(0)
            if alone and agg[3] is not None and since <= t0 and t1 <= until:
                out.add(t0, t1, n, agg)
                continue
            ts, vs = codec.decode(data)
            self.decoded += len(ts)
            _merge(points, ts, vs, tier, since, until)
        for ts, vs in recent:
            _merge(points, ts, vs, 0, since, until)
        for _, t, v in sorted(points.values(), key=lambda p: p[1]):
            out.add(t, t, 1, (v, v, v, 1, v) if v == v else (None, None, 0.0, 0, None))
        return out if out.points else None

    def has_points(self, key: str, since: float, until: float) -> bool:
        """Whether ``key`` has a point in ``[since, until]``."""
        return self.summary(key, since, until) is not None

    def _has_aggregates(self) -> bool:
        columns = {r[1] for r in self.con.execute("PRAGMA table_info(blocks)")}
        return set(AGGREGATES) <= columns

    def _recent(
        self, ids: set[int], since: float, until: float
    ) -> dict[int, list[tuple[list[float], list[float]]]]:
        found: dict[int, list[tuple[list[float], list[float]]]] = {}
        for (data,) in self.con.execute(
            "SELECT data FROM recent WHERE t0 <= ? AND t1 >= ?", (until, since)
        ):
            for sid, ts, vs in _unpack(data):
                self.decoded += len(ts)
                if sid in ids:
                    found.setdefault(sid, []).append((ts, vs))
        return found

    def events(
        self, since: float, until: float, kinds: Sequence[str] = (), limit: int | None = None
    ) -> list[Event]:
        sql = "SELECT id, t, kind, subject, text, data FROM events WHERE t >= ? AND t <= ?"
        args: list[Any] = [since, until]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        sql += " ORDER BY t, id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self.con.execute(sql, args).fetchall()
        return [
            Event(t, kind, subject, text, json.loads(data) if data else {}, id=eid)
            for eid, t, kind, subject, text, data in rows
        ]

    def span(self) -> tuple[float, float] | None:
        """(first, last) time anything was recorded; None for an empty store."""
        with self._lock:
            lo, hi = self.con.execute(
                "SELECT min(m), max(x) FROM (SELECT min(t0) m, max(t1) x FROM blocks UNION ALL "
                "SELECT min(t0), max(t1) FROM recent UNION ALL SELECT min(t), max(t) FROM events)"
            ).fetchone()
        return None if lo is None else (lo, hi)

    def used_bytes(self) -> int:
        """Bytes the history takes: the file's pages in use (free pages not counted) and
        its WAL, which ``journal_size_limit`` keeps near 4 MiB between checkpoints: most
        of a young history's size, so every figure of the history's size counts it."""
        with self._lock:
            pages = self.con.execute("PRAGMA page_count").fetchone()[0]
            free = self.con.execute("PRAGMA freelist_count").fetchone()[0]
            size = self.con.execute("PRAGMA page_size").fetchone()[0]
        return (pages - free) * size + self.wal_bytes()

    def wal_bytes(self) -> int:
        """The size of the -wal file beside the history (0 when there is none)."""
        try:
            return os.lstat(self.path + "-wal").st_size
        except OSError:
            return 0

    def close(self) -> None:
        with self._lock:
            try:
                self.con.close()
            except sqlite3.Error:
                log.debug("closing the history failed", exc_info=True)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (ROLLBACK on error) under the store's lock."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        self.store._lock.acquire()
        try:
            self.store.con.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.store._lock.release()
            raise
        return self.store.con

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            if kind is None:
                self.store.con.execute("COMMIT")
            else:
                self.store.con.execute("ROLLBACK")
                self.store._series.clear()  # ids made in the rolled-back transaction are gone
        except sqlite3.Error:
            if kind is None:
                raise
        finally:
            self.store._lock.release()


def _merge(
    points: dict[int, tuple[int, float, float]],
    ts: list[float],
    vs: list[float],
    tier: int,
    since: float,
    until: float,
) -> None:
    """Add points; a finer tier's point replaces a coarser one at the same millisecond."""
    for t, v in zip(ts, vs, strict=True):
        if since <= t <= until:
            ms = round(t * 1000)
            old = points.get(ms)
            if old is None or old[0] >= tier:
                points[ms] = (tier, t, v)


def _pack(store: Store, columns: Columns) -> bytes:
    """Several series in one ``recent`` row: per series its id and a codec block."""
    out = bytearray()
    for key, (ts, vs) in columns.items():
        if not ts:
            continue
        block = codec.encode(ts, vs, key.rsplit(":", 1)[-1])
        out += store.series_id(key).to_bytes(4, "little") + len(block).to_bytes(4, "little")
        out += block
    return bytes(out)


def _unpack(data: bytes) -> Iterable[tuple[int, list[float], list[float]]]:
    pos = 0
    while pos < len(data):
        sid = int.from_bytes(data[pos : pos + 4], "little")
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        ts, vs = codec.decode(data[pos + 8 : pos + 8 + size])
        pos += 8 + size
        yield sid, ts, vs
