"""The ``run`` wrapper's record of its command: on a thread of its own, so that nothing the
store does (a busy writer, a slow disk) delays the command's start or the passing on of a
signal. What only a live process shows is read first, then the store is opened and the
start written; at the end the end is written and the store closed."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from .common import PROG


def note(text: str) -> None:
    """One line on stderr; a closed or broken stderr never ends the wrapper."""
    try:
        sys.stderr.write(f"{PROG}: note: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class RunRecord(threading.Thread):
    """``start()`` once the command runs; ``seen`` is set once its live facts are kept;
    ``finish(status)`` when it ended, then ``join(wait)``. ``stderr``: the command's stderr
    file as ``ended.stderr_facts`` read it before the start (the wrapper's own, inherited)."""

    def __init__(self, path: str, pid: int, argv: list[str], stderr: dict[str, Any]) -> None:
        super().__init__(name="trainwatch-run-record", daemon=True)
        from ..core.record.events import run_name

        self.path, self.pid, self.argv, self.stderr = path, pid, argv, stderr
        self.name_ = run_name(argv)
        self.seen = threading.Event()
        self._ended = threading.Event()
        self._status: int | None = None
        self._store: Any = None

    def run(self) -> None:
        from ..core.record import Event, ended
        from ..core.record.proc_connector import signal_name

        try:
            kept = self._live_facts()
        finally:
            self.seen.set()
        self._store = self._open()
        name, pid = self.name_, self.pid
        said = f"{name} (pid {pid}) started by {PROG} run"
        self._add(Event(kept["started"], "run-started", name, said, kept))
        self._ended.wait()
        code = self._status if self._status is not None else 0
        exit_info: dict[str, Any] = {"code": code}
        if code < 0:
            exit_info = {"code": None, "signal": signal_name(-code)}
        facts: dict[str, Any] = {}
        try:
            if kept.get("stderr") and ended.shared_with_others(os.getpid(), kept["stderr"]):
                kept["stderr"] = None  # another process wrote there meanwhile: not its lines
            facts = ended.at_end(kept)
        except Exception as exc:  # a fact missing, never the end itself
            note(f"what the command left was not read: {exc}")
        text = f"{name} (pid {pid}) ended: " + (exit_info.get("signal") or f"exit status {code}")
        self._add(Event(time.time(), "run-ended", name, text, {**kept, **facts, "exit": exit_info}))
        if self._store is not None:
            self._store.close()

    def finish(self, status: int) -> None:
        """The command ended with ``status`` (Popen's returncode: -N for signal N)."""
        self._status = status
        self._ended.set()

    def _live_facts(self) -> dict[str, Any]:
        from ..core.record import ended

        kept: dict[str, Any] = {
            "pid": self.pid,
            "command": " ".join(self.argv),
            "name": self.name_,
            "cwd": os.getcwd(),
            "paths": [],
        }
        try:
            kept.update(ended.at_start(self.pid, stderr=False))
            # its stderr is ours (it inherited it): its own when no one outside our line (its
            # line: we are its parent) writes there
            target = self.stderr.get("stderr")
            mine = target and not ended.shared_with_others(os.getpid(), target)
            kept.update(self.stderr if mine else {"stderr": None})
        except Exception as exc:  # a fact missing, never the run
            note(f"what the command's process shows was not read: {exc}")
        kept["started"] = kept.get("started") or time.time()
        return kept

    def _open(self) -> Any:
        from ..core.record import Store

        try:
            store = Store(self.path, role="run")
            store.register()
        except Exception as exc:
            note(f"recording off ({exc}); the command runs anyway")
            return None
        return store

    def _add(self, event: Any) -> None:
        if self._store is None:
            return
        try:
            self._store.add_events([event])
        except Exception as exc:  # the run goes on without its record
            note(f"the history was not written: {exc}")
