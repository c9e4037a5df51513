"""fix.checkpoint.events: a save's decision is recorded off the training thread. Opening the
history as a writer checks the whole file and may wait for the server's recorder to commit
(up to the busy timeout); the training loop that made room for a checkpoint must not."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.record import Store
from trainwatch_lab.core.record.location import STORE_ENV
from trainwatch_lab.fix.checkpoint import events as save_events


def _kinds(path: Path) -> list[str]:
    store = Store(str(path), readonly=True)
    try:
        return [e.kind for e in store.events(0, 2e9)]
    finally:
        store.close()


def test_an_event_is_recorded_after_the_writer_holding_the_history_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state" / "history.sqlite"
    monkeypatch.setenv(STORE_ENV, str(path))
    Store(str(path), role="t").close()  # the history exists, as the server made it
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the server's recorder in a long write
    try:
        save_events.record(save_events.ROOM_MADE, "/ckpt", "removed ckpt-0001.pt", freed=1)
        # back at once, the history still held: the event waits on the writer's thread
        assert holder.in_transaction
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert wait_until(lambda: save_events.ROOM_MADE in _kinds(path), timeout=60), _kinds(path)
    save_events.record(save_events.RESUMED, "/ckpt", "resumed", waited_s=3)
    assert wait_until(lambda: save_events.RESUMED in _kinds(path), timeout=60)
    store = Store(str(path), readonly=True)
    try:
        writers = store.con.execute("SELECT count(*) FROM writers WHERE role='save'").fetchone()
        (made,) = [e for e in store.events(0, 2e9) if e.kind == save_events.ROOM_MADE]
    finally:
        store.close()
    assert writers == (1,)  # one writer row for the process, not one per event
    assert made.data == {"freed": 1, "pid": os.getpid()}
