"""``--record`` of ``watch`` and ``serve``: the Recorder beside the sampler (core.record)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.defaults import DEFAULTS
from .common import PROG, UsageError, seconds


def add_record(parser: argparse.ArgumentParser, every: float) -> None:
    """``--record [--store FILE] [--record-every S]``."""
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write what is sampled to the recorded history, for `trainwatch-lab "
        "history` after a restart (default: off)",
    )
    add_store(parser)
    parser.add_argument(
        "--record-every",
        type=seconds,
        default=every,
        metavar="S",
        help=f"keep a sample every S seconds in the history (default: {every:g}; "
        "e.g. --record-every 5)",
    )


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="FILE",
        help="the history file (default: $TRAINWATCH_STORE, else one per machine on a local "
        "disk, see README; e.g. --store /var/tmp/history.sqlite)",
    )


def store_path(args: argparse.Namespace) -> str:
    """The history file of ``--store`` (or the default), or UsageError when it may not
    hold the history: one line, and never another file than the one given."""
    from ..core.record import choose
    from ..core.record.location import Refused

    try:
        where = choose(explicit_file=args.store)
    except Refused as exc:  # never another file than the one asked for
        raise UsageError(str(exc)) from None
    except LookupError as exc:
        raise UsageError(f"no local place for the history: {exc}") from None
    for note in where.notes:
        sys.stderr.write(f"{PROG}: note: {note}; using {where.path}\n")
    return where.path


def start_recorder(
    args: argparse.Namespace, sampler: Any, role: str, path: str | None, notify: Any = None
) -> Any:
    """A started Recorder writing to ``path`` (``store_path``, checked before anything
    started) subscribed to ``sampler``, keeping what ``notify`` sends; None without
    ``--record``."""
    if not args.record or path is None:
        return None
    from ..core.record import Recorder

    recorder = Recorder(path, role=role, every=args.record_every)
    sampler.subscribe(recorder)
    if notify is not None:
        notify.on_sent = recorder.notified(notify.fmt)
    return recorder.start()


DEFAULT_EVERY = {"watch": DEFAULTS.record_look_every_s, "serve": DEFAULTS.record_every_s}
