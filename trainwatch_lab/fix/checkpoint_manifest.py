"""Which files ``save_checkpoint`` wrote: a manifest beside them, so that ``keep=N`` removes
only its own saves of the same series, never a file it did not write (the user's own
``resnet50-epoch0.pt``, another model's ``resnet18-epoch90.pt``, last month's run).

``.trainwatch-saves.json`` in the save directory maps each name a save landed under to the
series it belongs to (the regular expression its names match) and when it landed. It is
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
        saves[added] = {"series": series, "time": time.time()}
    return json.dumps({"version": VERSION, "saves": saves}, indent=1, sort_keys=True)
