"""One event per fact per machine, however many writers share the store.

Why: the Jupyter server, ``serve --record``, ``watch --record`` and the ``run`` wrapper each
sample the same machine and each would record the same warning raised, the same process
ended, the same checkpoint saved; three writers wrote every warning three times. Each
writer's events are checked against what the store already holds, inside the writer's own
``BEGIN IMMEDIATE`` transaction (SQLite's write lock: two writers never both see "not yet
told" for one fact):

- a warning's state (``warning-raised`` / ``warning-cleared`` of one code and subject) is
  told when it changes: a raise when another writer's last word on it was a raise (one
  that still runs, or one that said it within ``SAME_MOMENT_S``) is the same fact; a raise
  by a writer long gone that never cleared it keeps nothing raised for ever, nor one older
  than ``SAME_FACT_S`` (told again once a day at most);
- a thing that happens once (a process seen or ended, by pid and start; a kernel's start and
  end; a checkpoint saved; a mount changed) is told once: the same kind and identity within
  ``SAME_FACT_S`` of each other is the same fact.

Events of other kinds (a run's own start and end, a notification sent, the store's own
notes) are each writer's own and always kept.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ..processes.discovery import stat_fields

WARNING_KINDS = ("warning-raised", "warning-cleared")
SAME_FACT_S = 86_400.0  # a pid and its start ticks name one process for at least this long
SAME_MOMENT_S = 60.0  # two writers notice one change (a mount, a kernel) this far apart at most

# kind -> (the data fields that name the fact with its subject, the window that is one fact)
ONCE: dict[str, tuple[tuple[str, ...], float]] = {
    "process-seen": (("pid", "start_ticks"), SAME_FACT_S),
    "process-ended": (("pid", "start_ticks"), SAME_FACT_S),
    "kernel-started": (("pid",), SAME_MOMENT_S),
    "kernel-restarted": (("pid", "was"), SAME_MOMENT_S),
    "kernel-ended": (("pid",), SAME_MOMENT_S),
    "checkpoint": (("newest_path", "newest_mtime"), 0.0),
    "mount-changed": (("now",), SAME_MOMENT_S),
}


def writer_alive(pid: int, start: str | None) -> bool:
    """Whether a writer of the store (its pid and start ticks) still runs."""
    fields = stat_fields(pid, "/proc")  # a writer of our store: a process of our namespace
    return fields is not None and (start is None or str(fields[1]) == start)


def _data(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def told(
    con: sqlite3.Connection,
    writer: int | None,
    t: float,
    kind: str,
    subject: str,
    data: dict[str, Any],
    alive: Callable[[int, str | None], bool] = writer_alive,
) -> bool:
    """Whether the store already holds this fact, told by another writer (see the module
    doc). Runs inside the caller's write transaction."""
    if kind in WARNING_KINDS:
        code = data.get("code")
        rows = con.execute(
            "SELECT e.kind, e.writer, e.data, w.pid, w.start, e.t FROM events e "
            "LEFT JOIN writers w ON w.id = e.writer WHERE e.subject = ? AND e.kind IN (?, ?) "
            "AND e.t >= ? AND e.t <= ? ORDER BY e.t DESC, e.id DESC LIMIT 200",
            (subject, *WARNING_KINDS, t - SAME_FACT_S, t + SAME_MOMENT_S),
        )
        for was, by, text, pid, start, when in rows:
            if _data(text).get("code") != code:
                continue
            if was != kind or by == writer:
                return False
            recent = abs(t - when) <= SAME_MOMENT_S
            return kind == "warning-cleared" or recent or (pid is not None and alive(pid, start))
        return False
    rule = ONCE.get(kind)
    if rule is None:
        return False
    fields, within = rule
    wanted = [data.get(f) for f in fields]
    if any(v is None for v in wanted):
        return False
    rows = con.execute(
        "SELECT data FROM events WHERE kind = ? AND subject = ? AND t >= ? AND t <= ? "
        "AND (writer IS NOT ? )",
        (kind, subject, t - within, t + within, writer),
    )
    return any([_data(text).get(f) for f in fields] == wanted for (text,) in rows)
