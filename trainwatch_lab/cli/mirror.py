"""``trainwatch-lab mirror LOCAL SHARE``: the command-line form of ``fix.local_mirror``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..core.paths.names import normalise, printable
from .common import PROG, RAW, UsageError, seconds, stop_signals

EPILOG = """\
examples:
  trainwatch-lab mirror /tmp/runs /mnt/share/runs                 until Ctrl-C, every 30 s
  trainwatch-lab mirror --every 5 /tmp/runs /mnt/share/runs       every 5 s
  trainwatch-lab mirror --once --timeout 600 /tmp/runs /mnt/runs  one copy, then exit

The share is touched by helper processes only: a share that stops answering never blocks
this command; what it lacks is copied when it answers again. Exit 0: the share holds
everything; 1: something is still to copy (the share did not answer); 2: bad usage.
"""


def add_parser(sub: Any) -> None:
    """The ``mirror`` subcommand, its defaults taken from fix.mirror."""
    from ..fix.mirror.mirror import EVERY_S, EXIT_SYNC_S

    mirror = sub.add_parser(
        "mirror",
        help="copy a local log directory to a share in the background (new and grown files)",
        description=(
            "Copy LOCAL to SHARE every S seconds: new files whole, grown files by their new\n"
            "bytes. Runs until SIGTERM or Ctrl-C, then copies what is left (--timeout)."
        ),
        epilog=EPILOG,
        formatter_class=RAW,
    )
    mirror.add_argument(
        "local",
        metavar="LOCAL",
        help="the local directory training writes to (required; e.g. /tmp/runs)",
    )
    mirror.add_argument(
        "share",
        metavar="SHARE",
        help="the directory on the share to copy to (required; e.g. /mnt/share/runs)",
    )
    mirror.add_argument(
        "--every",
        type=seconds,
        default=EVERY_S,
        metavar="S",
        help=f"seconds between copies (default: {EVERY_S:g}; e.g. --every 5)",
    )
    mirror.add_argument(
        "--once", action="store_true", help="copy once and exit (default: until stopped)"
    )
    mirror.add_argument(
        "--timeout",
        type=seconds,
        default=EXIT_SYNC_S,
        metavar="S",
        help=f"seconds the last copy may take (default: {EXIT_SYNC_S:g}; e.g. --timeout 600)",
    )


def _start_mirror(args: argparse.Namespace) -> Any:
    """A running Mirror, or UsageError (one line) for a LOCAL or SHARE it cannot use."""
    from ..core.guard.guard import default_guard
    from ..core.private import untrusted
    from ..fix import scratch
    from ..fix.mirror.mirror import Mirror, check_share

    local, share = normalise(args.local), normalise(args.share)
    why = scratch.local_refusal(local)
    if why is not None:
        raise UsageError(f"LOCAL: {why}")
    if not os.path.isdir(local):  # a local disk: safe to look at from here
        raise UsageError(f"LOCAL {printable(local)} is not a directory")
    why = untrusted(local)  # another user could read the logs there, or add files
    if why is not None:
        raise UsageError(f"LOCAL: {why}")
    try:
        check_share(share, default_guard())
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    fd = scratch.lock(local)
    if fd is None:
        raise UsageError(f"another process mirrors {printable(local)} already")
    try:
        return Mirror(local, share, every=args.every, exit_timeout=args.timeout, lock_fd=fd)
    except ValueError as exc:
        scratch.release(fd)
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the share holds everything at the end, 1 when something is left to copy."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    logging.getLogger("trainwatch_lab").addHandler(handler)
    logging.getLogger("trainwatch_lab").setLevel(logging.WARNING)
    mirror = _start_mirror(args)
    if not args.once:
        with stop_signals() as stop:
            sys.stderr.write(
                f"{PROG}: mirroring {printable(mirror.local)} to {printable(mirror.share)} "
                f"every {args.every:g} s; stop with Ctrl-C or SIGTERM\n"
            )
            stop.wait()
    done = mirror.close(timeout=args.timeout)
    sys.stderr.write(f"{PROG}: {mirror.status().text()}\n")
    return 0 if done else 1
