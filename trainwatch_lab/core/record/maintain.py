"""Keeping the history bounded: fold what dead writers left, thin old points, drop the oldest.

As netdata's tiers do, old data is not dropped at once: points older than
``record_raw_s`` (1 day) become one mean per ``record_thin_step_s`` (1 min), kept until
``record_keep_s`` (7 days). Past the size cap (``record_max_bytes``) the thinning moves
closer to now and then the oldest blocks go; whenever history is dropped an event says
from when to when. Every step is one short transaction, so it runs beside the writers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import defaultdict

from . import codec
from .facts import writer_alive
from .store import Columns, Store

log = logging.getLogger(__name__)
DROPPED = "history-dropped"


def fold_orphans(store: Store) -> int:
    """Turn the ``recent`` rows of writers that died (SIGKILL, power loss) into blocks;
    the number of writers folded."""
    con = store.con
    with store._lock:
        writers = con.execute(
            "SELECT DISTINCT w.id, w.pid, w.start FROM writers w JOIN recent r ON r.writer = w.id"
        ).fetchall()
        orphans = {
            r[0]: r[0]
            for r in con.execute(
                "SELECT DISTINCT writer FROM recent WHERE writer NOT IN (SELECT id FROM writers)"
            )
        }
    dead = [
        wid
        for wid, pid, start in writers
        if wid != store.writer_id and not writer_alive(pid, start)
    ] + list(orphans)
    for wid in dead:
        with store.transaction():
            columns: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
            rows = con.execute("SELECT data FROM recent WHERE writer = ? ORDER BY t0", (wid,))
            from .store import _unpack

            for (data,) in rows.fetchall():
                for sid, ts, vs in _unpack(data):
                    columns[sid][0].extend(ts)
                    columns[sid][1].extend(vs)
            keys = dict(con.execute("SELECT id, key FROM series").fetchall())
            named: Columns = {keys[sid]: col for sid, col in columns.items() if sid in keys}
            store._insert_blocks(named, wid, 0)
            con.execute("DELETE FROM recent WHERE writer = ?", (wid,))
    return len(dead)


Buckets = dict[int, list[float]]  # bucket number -> [sum, count]


def fold(sums: Buckets, ts: list[float], vs: list[float], step: float) -> None:
    """Add points to per-``step`` buckets (a chart folds slice after slice into one)."""
    for t, v in zip(ts, vs, strict=True):
        if math.isfinite(v):
            acc = sums.setdefault(int(t // step), [0.0, 0.0])
            acc[0] += v
            acc[1] += 1


def bucket_means(sums: Buckets, step: float) -> tuple[list[float], list[float]]:
    """Each bucket's middle and the mean of its values, by time."""
    order = sorted(sums)
    return [(b + 0.5) * step for b in order], [sums[b][0] / sums[b][1] for b in order]


def means(ts: list[float], vs: list[float], step: float) -> tuple[list[float], list[float]]:
    """One point per ``step`` bucket: the bucket's middle and the mean of its values."""
    sums: Buckets = {}
    fold(sums, ts, vs, step)
    return bucket_means(sums, step)


def thin(store: Store, before: float) -> int:
    """Recorded (tier 0) blocks that end before ``before`` become tier-1 means; how many."""
    step = store.defaults.record_thin_step_s
    con = store.con
    with store._lock:
        sids = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT series FROM blocks WHERE tier = 0 AND t1 < ?", (before,)
            )
        ]
        keys = dict(con.execute("SELECT id, key FROM series").fetchall())
    done = 0
    for sid in sids:
        with store.transaction():
            rows = con.execute(
                "SELECT t0, writer, data FROM blocks WHERE series = ? AND tier = 0 AND t1 < ? "
                "ORDER BY t0",
                (sid, before),
            ).fetchall()
            points: dict[int, tuple[float, float]] = {}
            for _, _, data in rows:
                for t, v in zip(*codec.decode(data), strict=True):
                    points[round(t * 1000)] = (t, v)
            order = sorted(points)
            ts, vs = means([points[k][0] for k in order], [points[k][1] for k in order], step)
            per = store.defaults.record_block_points
            for i in range(0, len(ts), per):
                chunk = (ts[i : i + per], vs[i : i + per])
                store._insert_blocks({keys[sid]: chunk}, 0, 1)
            con.execute(
                "DELETE FROM blocks WHERE series = ? AND tier = 0 AND t1 < ?", (sid, before)
            )
            done += len(rows)
    return done


def drop_before(store: Store, before: float, why: str, now: float | None = None) -> int:
    """Delete blocks, recent rows and events older than ``before``; an event says so."""
    con = store.con
    with store.transaction():
        first = con.execute("SELECT min(t0) FROM blocks WHERE t1 < ?", (before,)).fetchone()[0]
        gone = con.execute("DELETE FROM blocks WHERE t1 < ?", (before,)).rowcount
        gone += con.execute("DELETE FROM recent WHERE t1 < ?", (before,)).rowcount
        gone += con.execute(
            "DELETE FROM events WHERE t < ? AND kind != ?", (before, DROPPED)
        ).rowcount
    if gone:
        start = time.strftime("%Y-%m-%d %H:%M", time.localtime(first)) if first else "the start"
        end = time.strftime("%Y-%m-%d %H:%M", time.localtime(before))
        at = time.time() if now is None else now
        text = f"history from {start} to {end} was dropped: {why}"
        data = {"until": before, "reason": why}
        with store.transaction():
            # the age limit drops a little every pass: one event a day says so, kept current
            last = con.execute(
                "SELECT id FROM events WHERE kind = ? AND t > ? AND data LIKE ? "
                "ORDER BY t DESC LIMIT 1",
                (DROPPED, at - 86_400.0, f'%"reason": "{why}"%'),
            ).fetchone()
            if last is not None:
                old = con.execute("SELECT text FROM events WHERE id = ?", last).fetchone()[0]
                text = old.split(" to ", 1)[0] + f" to {end} was dropped: {why}"
                con.execute(
                    "UPDATE events SET t = ?, text = ?, data = ? WHERE id = ?",
                    (at, text, json.dumps(data), last[0]),
                )
            else:
                con.execute(
                    "INSERT INTO events (t, kind, subject, text, data, writer) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (at, DROPPED, store.path, text, json.dumps(data), store.writer_id),
                )
    return gone


def maintain(store: Store, now: float | None = None) -> list[str]:
    """One pass: fold, thin, drop by age, then by size; what it did, for the log."""
    d = store.defaults
    now = time.time() if now is None else now
    done: list[str] = []
    if fold_orphans(store):
        done.append("folded a dead writer's last values")
    if thin(store, now - d.record_raw_s):
        done.append("thinned points older than a day")
    if drop_before(
        store, now - d.record_keep_s, f"older than {d.record_keep_s / 86400:g} days", now
    ):
        done.append("dropped history past the age limit")
    # size cap: thin ever closer to now, then drop the oldest, until under 90 % of the cap
    horizon = d.record_raw_s
    for _ in range(32):
        used = store.used_bytes()
        if used <= d.record_max_bytes:
            break
        with store._lock:
            first = store.con.execute("SELECT min(t0) FROM blocks").fetchone()[0]
        if first is None:
            break
        if horizon > 2 * d.record_flush_s * d.record_block_points:
            horizon /= 2
            thin(store, now - horizon)
        else:
            share = max(0.1, 1.0 - 0.9 * d.record_max_bytes / used)  # what must go, about
            cut = first + (now - first) * share
            drop_before(
                store,
                cut,
                f"the history reached its size cap ({d.record_max_bytes / 2**20:.0f} MiB)",
                now,
            )
        store.con.executescript("PRAGMA incremental_vacuum;")  # (execute: one page)
        store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if "made room under the size cap" not in done:
            done.append("made room under the size cap")
    with store._lock:
        store.con.executescript("PRAGMA incremental_vacuum;")  # (execute: one page)
    if done:
        log.info("trainwatch history (%s): %s", os.path.basename(store.path), "; ".join(done))
    return done
