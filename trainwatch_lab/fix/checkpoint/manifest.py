"""Which files ``save_checkpoint`` wrote: a manifest beside them, so that ``keep=N`` removes
only its own saves of the same series, never a file it did not write (the user's own
``resnet50-epoch0.pt``, another model's ``resnet18-epoch90.pt``, last month's run).

``.trainwatch-saves.json`` in the save directory maps each name a save landed under to the
series it belongs to (the regular expression its names match), when it landed and its place
in the saver's own count (``seq``: 1, 2, 3, ...). The count, not a clock, says which save is
newer: a clock stepped back (NTP, a restored VM) gives a new save an older mtime and time,
and ``keep=N`` would then remove the real newest (issue 34). It is
rewritten atomically (core.worker.files.op_write_text) after every save and removal; an
unreadable one counts as empty (nothing is removed then, which is safe). Saves made before
this manifest existed are not in it and are never removed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

MANIFEST = ".trainwatch-saves.json"
VERSION = 1


def parse(text: str | None) -> dict[str, dict[str, Any]]:
    """The manifest's entries, name -> {"series", "time"}; {} for none or a broken one."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    saves = data.get("saves") if isinstance(data, dict) else None
    if not isinstance(saves, dict):
        return {}
    return {n: e for n, e in saves.items() if isinstance(n, str) and isinstance(e, dict)}


def owned(entries: dict[str, dict[str, Any]], series: str) -> set[str]:
    """The names this saver wrote for ``series``."""
    return {n for n, e in entries.items() if e.get("series") == series}


def sequence(entries: dict[str, dict[str, Any]], name: str) -> tuple[int, float]:
    """Sort key of ``name``, larger is newer: our saves by their ``seq``; ours from before
    the count (no ``seq``, older than any counted one) by their time; others never rank
    above ours (-1: only their mtime orders them, ``order`` does that)."""
    entry = entries.get(name)
    if entry is None:
        return (-1, 0.0)
    seq = entry.get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool):
        return (1, float(seq))
    when = entry.get("time")
    return (0, float(when) if isinstance(when, (int, float)) else 0.0)


def order(saves: list[list[Any]], entries: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """``saves`` (``[name, bytes, mtime]``) newest first: ours by the saver's own count,
    then files it did not write by mtime (they are never removed; the newest of them only
    stands for the size of the next save when there is no save of ours)."""
    return sorted(saves, key=lambda s: (sequence(entries, s[0]), s[2]), reverse=True)


def next_seq(entries: dict[str, dict[str, Any]]) -> int:
    seqs = [e.get("seq") for e in entries.values()]
    return 1 + max((q for q in seqs if isinstance(q, int) and not isinstance(q, bool)), default=0)


def updated(
    entries: dict[str, dict[str, Any]],
    present: Iterable[str],
    added: str | None = None,
    series: str = "",
    removed: Iterable[str] = (),
) -> str:
    """The manifest's next text: ``added`` recorded, ``removed`` and names no longer in the
    directory (``present``) dropped."""
    keep = set(present) - set(removed)
    saves = {n: e for n, e in entries.items() if n in keep}
    if added is not None:
        saves[added] = {"series": series, "time": time.time(), "seq": next_seq(entries)}
    return json.dumps({"version": VERSION, "saves": saves}, indent=1, sort_keys=True)
