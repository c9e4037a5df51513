"""A small disk that a training loop fills, and the child process that trains on it (issue
38's tests: tests/fix/checkpoint/test_full_disk_training.py and
tests/integrations/test_*_full_disk.py).

The training runs in a child (the frameworks are imported there only); it prints one JSON
object a line. ``wait_then_free`` is the wait scenario all of them share: the pause heard on a
real webhook, the child still alive at its save, another process frees the space, the child
finishes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.frameworks import child_env
from tests.support.mounts import wait_until

MIB = 1024 * 1024
SAVE_BYTES = 2 * MIB  # Linear(512, 1024): 2 MiB of weights and a 4 KiB bias
CHILD_TIMEOUT_S = 240

CHECK = textwrap.dedent(
    """
    import json, sys, torch
    print(json.dumps({p: torch.load(p)["epoch"] for p in sys.argv[1:]}))
    """
)


def fill_to(root: Path, room: int) -> Path:
    """A filler file on the filesystem of ``root`` that leaves ``room`` bytes free."""
    free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
    filler = root / "old-dataset.bin"
    with open(filler, "wb") as fh:
        fh.write(b"d" * (free - room))
        os.fsync(fh.fileno())
    return filler


def small_disk(loop_ext4: Callable[..., Any]) -> tuple[Path, Path]:
    """A 32 MiB ext4 whose free space, after a filler, holds 2.5 saves: the 3rd dies."""
    m = loop_ext4(size_mb=32)
    ckpt = m.path / "ckpt"
    ckpt.mkdir()
    return ckpt, fill_to(m.path, int(2.5 * SAVE_BYTES))


def start_child(script: str, *args: object) -> subprocess.Popen[str]:
    """``python -c script args...`` with the child's environment (tests.support.frameworks)."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *(str(a) for a in args)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def json_lines(out: str) -> list[dict[str, Any]]:
    """The JSON objects among a child's lines (a framework prints its own dicts too)."""
    found = []
    for line in out.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                found.append(json.loads(line))
    return found


def finish(proc: subprocess.Popen[str]) -> tuple[list[dict[str, Any]], str]:
    """The child's JSON lines (in order) and its stderr, once it ends."""
    out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    return json_lines(out), err


def wait_then_free(
    proc: subprocess.Popen[str],
    webhook: Any,
    filler: Path,
    while_paused: Callable[[dict[str, Any]], None],
) -> tuple[list[dict[str, Any]], str]:
    """Wait until ``webhook`` hears the pause, check the child is alive and run
    ``while_paused(first body)``, remove ``filler`` from another process, and finish the
    child (killed if anything failed on the way). The webhook is closed; its bodies stay."""
    try:
        wait_until(lambda: webhook.requests or proc.poll() is not None, CHILD_TIMEOUT_S)
        assert webhook.requests, "no pause was notified: " + (
            proc.stderr.read()[-3000:] if proc.poll() is not None and proc.stderr else ""
        )
        told = webhook.bodies()[0]
        assert told["state"] == "started" and told["code"] == "checkpoint-wont-fit", told
        assert proc.poll() is None, "the child ended instead of pausing at its save"
        while_paused(told)
        subprocess.run(["rm", str(filler)], check=True, timeout=30)  # another process frees
        return finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        webhook.close()


def recorded_kinds(since: float, subject: Path) -> list[str]:
    """The kinds of the events recorded about ``subject`` since ``since`` (time.time()), once
    this process's own save events have landed (a thread of their own writes them:
    fix.checkpoint.events; reading at once raced it)."""
    from trainwatch_lab.core.record import Store, choose
    from trainwatch_lab.fix.checkpoint import events

    events._writer.drain(60.0)

    store = Store(choose().path)
    try:
        events = store.events(since - 1, time.time() + 5)
    finally:
        store.close()
    return [e.kind for e in events if e.subject == str(subject)]
