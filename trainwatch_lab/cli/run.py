"""``trainwatch-lab run -- CMD...``: run a training script and record how it ended.

The exit status of a process is known only to its parent, so this thin parent records the
start (command, working directory, its own stderr file, memory cgroup) and the end (exit
status or signal, OOM kills counted in its cgroup meanwhile, the last lines the command
wrote to stderr when that is a regular file no one else writes) as events of the recorded
history; ``history why`` reads them. The command starts first and runs whatever happens to
the history: the record is written on a thread of its own (cli.run_record), and a store
that cannot be written is one note on stderr. Every signal a job gets from a terminal, a
shell or a batch system is passed on to the command, never ending the wrapper
(cli.forward). The exit code is the command's (128 + N when a signal ended it), and, as a
shell's, 127 for a command not found and 126 for one that cannot be executed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import subprocess
from typing import Any

from ..core.defaults import DEFAULTS
from .common import PROG, RAW, UsageError
from .forward import Forwarder
from .record import add_store, store_path
from .run_record import RunRecord, note

EPILOG = """\
examples:
  nohup trainwatch-lab run -- python train.py --epochs 90 > train.log 2>&1 &
  trainwatch-lab run --store /var/tmp/h.sqlite -- ./train.sh
then: trainwatch-lab history why train.py
"""
NOT_FOUND, NOT_EXECUTABLE = 127, 126  # a shell's codes


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


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("run needs a command after --, e.g. run -- python train.py")
    path = store_path(args)  # the mount table and local lstat only: never waits
    forwarder = Forwarder().install()  # before the command exists: nothing can orphan it
    try:
        from ..core.record.ended import stderr_facts

        stderr = stderr_facts()  # procfs, the mount table, a local fstat: never waits
        try:
            child = subprocess.Popen(argv)
        except OSError as exc:
            note_failed(argv[0], exc)
            return NOT_FOUND if exc.errno == errno.ENOENT else NOT_EXECUTABLE
        forwarder.started(child)
        record = RunRecord(path, child.pid, argv, stderr)
        try:
            record.start()
            _wait_exited(child.pid)  # (not reaped: its /proc stays for the facts)
            record.seen.wait(DEFAULTS.run_record_wait_s)
        finally:
            code = child.wait()
            record.finish(code)
            record.join(DEFAULTS.run_record_wait_s)
            if record.is_alive():
                wait = DEFAULTS.run_record_wait_s
                note(f"the end was not recorded: the history did not answer in {wait:g} s")
    finally:
        forwarder.restore()
    return 128 - code if code < 0 else code


def _wait_exited(pid: int) -> None:
    """Wait until ``pid`` exited, without reaping it (signals are handled meanwhile)."""
    # (ChildProcessError: reaped already, a signal passed on after its end polled it)
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def note_failed(command: str, exc: OSError) -> None:
    """As a shell says it: ``trainwatch-lab: train.sh: Permission denied``."""
    with contextlib.suppress(OSError):
        os.write(2, f"{PROG}: {command}: {exc.strerror}\n".encode(errors="replace"))
