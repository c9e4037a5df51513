"""``trainwatch-lab run -- CMD...``: run a training script and record how it ended.

The exit status of a process is known only to its parent, so this thin parent records the
start (command, working directory, stderr file, memory cgroup) and the end (exit status or
signal, OOM kills counted in its cgroup meanwhile, the last lines of stderr when that is a
regular file) as events of the recorded history; ``history why`` reads them. The command
runs whatever happens to the history: a store that cannot be written is one note on stderr.
SIGTERM is passed on to the command, and so are SIGINT and SIGHUP unless the command is in
the foreground of a terminal: there Ctrl-C (or the hangup) already reached the whole
process group, and a second SIGINT would abort a script's ``except KeyboardInterrupt:``
emergency save. The exit code is the command's (128 + N when a signal ended it, as a shell
reports it).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from .common import PROG, RAW, UsageError
from .record import add_store, store_path

log = logging.getLogger(__name__)
EPILOG = """\
examples:
  nohup trainwatch-lab run -- python train.py --epochs 90 > train.log 2>&1 &
  trainwatch-lab run --store /var/tmp/h.sqlite -- ./train.sh
then: trainwatch-lab history why train.py
"""
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGHUP)  # what a terminal sends its foreground


def _in_foreground(pid: int) -> bool:
    """Whether ``pid`` is in the foreground process group of our controlling terminal."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgid(pid)
        except OSError:  # no controlling terminal, or the child is gone
            continue
    return False


def _pass_on(child: subprocess.Popen[bytes]) -> Any:
    """The wrapper's handler: the signal to the command, unless the terminal sent it both."""

    def handler(signum: int, frame: Any) -> None:
        if signum in TERMINAL_SIGNALS and _in_foreground(child.pid):
            return
        child.send_signal(signum)

    return handler


def add_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a command and record its exit status and why it ended",
        description="Run CMD; record its start and end (status, OOM kill, stderr) in the history.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_store(run)
    run.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments"
    )


def _record(store: Any, *events: Any) -> None:
    if store is None:
        return
    try:
        store.add_events(list(events))
    except Exception as exc:  # the run goes on without its record
        sys.stderr.write(f"{PROG}: note: the history was not written: {exc}\n")


def run(args: argparse.Namespace) -> int:
    from ..core.record import Event, Store, ended
    from ..core.record.events import run_name

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("run needs a command after --, e.g. run -- python train.py")
    path = store_path(args)
    try:
        store: Any = Store(path, role="run")
        store.register()
    except Exception as exc:
        sys.stderr.write(f"{PROG}: note: recording off ({exc}); running the command anyway\n")
        store = None
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        raise UsageError(f"cannot run {argv[0]}: {exc.strerror}") from None
    name = run_name(argv)
    kept = {
        "pid": child.pid,
        "command": " ".join(argv),
        "name": name,
        "cwd": os.getcwd(),
        "paths": [],
        **ended.at_start(child.pid),
    }
    kept["stderr"] = ended.stderr_file(os.getpid())  # the child writes to ours
    kept["started"] = time.time()
    _record(
        store,
        Event(
            kept["started"],
            "run-started",
            name,
            f"{name} (pid {child.pid}) started by {PROG} run",
            kept,
        ),
    )
    handler = _pass_on(child)
    previous = {s: signal.signal(s, handler) for s in PASSED_ON}
    try:
        code = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    exit_info: dict[str, Any] = {"code": code}
    if code < 0:
        exit_info = {"code": None, "signal": signal.Signals(-code).name}
    facts = ended.at_end(kept)
    _record(
        store,
        Event(
            time.time(),
            "run-ended",
            name,
            f"{name} (pid {child.pid}) ended: "
            + (exit_info.get("signal") or f"exit status {code}"),
            {**kept, **facts, "exit": exit_info},
        ),
    )
    if store is not None:
        store.close()
    return 128 - code if code < 0 else code
