"""The panel's mirror lines: the server lists this machine's live log mirrors (from the status
files they publish on local disk) in the snapshot and in every streamed sample."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from trainwatch_lab.core.paths.names import short_path
from trainwatch_lab.fix.mirror.mirror import local_mirror
from trainwatch_lab.fix.scratch import ROOT_ENV

from .conftest import INTERVAL

API = ("trainwatch-lab", "api")


async def snapshot(jp_fetch) -> dict:
    return json.loads((await jp_fetch(*API, "snapshot")).body.decode())


async def test_live_mirrors_are_in_the_snapshot_and_the_stream(
    jp_fetch, jp_ws_fetch, hub, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "scratch"
    monkeypatch.setenv(ROOT_ENV, str(root))  # where a kernel's mirror puts its local side
    m = local_mirror(tmp_path / "share" / "exp1", every=60)
    try:
        (m / "events.out.tfevents.1").write_bytes(b"e" * 100)
        assert m.sync(10)
        await asyncio.sleep(INTERVAL * 2)
        (listed,) = (await snapshot(jp_fetch))["mirrors"]
        assert listed["local"] == m.local and listed["pid"] == os.getpid()
        assert listed["state"] == "in-sync" and listed["bytes_copied"] == 100
        assert listed["text"] == m.status().text()  # Python's words
        assert listed["text"].startswith(f"mirror to {short_path(m.share, 2)}: in sync (1 file")
        ws = await jp_ws_fetch(*API, "stream")
        try:
            streamed = json.loads(await asyncio.wait_for(ws.read_message(), 10))
        finally:
            ws.close()
        assert [x["local"] for x in streamed["mirrors"]] == [m.local]
    finally:
        m.close(10)
    await asyncio.sleep(INTERVAL * 3)
    assert (await snapshot(jp_fetch))["mirrors"] == []  # closed: no longer listed
