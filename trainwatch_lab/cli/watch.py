"""``trainwatch-lab watch [PATH...]``: sample live until Ctrl-C or ``--duration``."""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.defaults import DEFAULTS
from ..core.model import SEVERITY_RANK, Sample
from .common import RAW, add_notify, interval, notifier, pid, refuse_impossible, seconds, user_paths
from .record import DEFAULT_EVERY, add_record, start_recorder, store_path
from .watch_output import WatchPrinter, json_line

EPILOG = """\
examples:
  trainwatch-lab watch /data runs                          a table per sample until Ctrl-C
                          (from your JupyterLab's sampler when one runs, as its panel shows)
  trainwatch-lab watch --no-attach /data                   sampled here, JupyterLab or not
  trainwatch-lab watch --interval 0.5 --duration 60 /data  twice a second, for a minute
  trainwatch-lab watch --json /data > samples.jsonl        one JSON object per sample per line
  trainwatch-lab watch                                     the training processes found here
  trainwatch-lab watch --processes /data                   /data and those processes' dirs
  trainwatch-lab watch --pid 4242 /mnt/share/runs          a script's time lost to storage
  trainwatch-lab watch --notify URL --notify-format slack /data   a webhook hears of warnings
  trainwatch-lab watch --record /data                      and keep it in the recorded history
  trainwatch-lab watch --record --record-every 5 --store /var/tmp/h.sqlite /data
"""


class _Terminated(Exception):
    """SIGTERM during ``watch``: stop like Ctrl-C, exit 143."""


def add_parser(sub: Any) -> None:
    """The ``watch`` subcommand: every option says its default and gives an example."""
    watch = sub.add_parser(
        "watch",
        help="sample devices, free space and fill rate live, with warnings as they arise",
        description=(
            "Sample live until Ctrl-C or --duration.\n"
            "Exit 0: no warning was raised; 1: a warning was raised; 130: interrupted."
        ),
        epilog=EPILOG,
        formatter_class=RAW,
    )
    watch.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=(
            "paths to watch (default: none, the training processes found here and their "
            "directories; e.g. /data runs)"
        ),
    )
    watch.add_argument(
        "--processes",
        action="store_true",
        help=(
            "also find training processes (GPU holders, TensorBoard event files, checkpoints "
            "open for writing; as root, writers of 1 MiB files into a watched PATH) and "
            "watch their directories (default: only without PATH)"
        ),
    )
    watch.add_argument(
        "--interval",
        type=interval,
        default=DEFAULTS.interval_s,
        metavar="S",
        help=(
            f"seconds between samples, at least {DEFAULTS.min_interval_s:g} "
            f"(default: {DEFAULTS.interval_s:g}; e.g. --interval 0.5)"
        ),
    )
    watch.add_argument(
        "--duration",
        type=seconds,
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C; e.g. --duration 60)",
    )
    watch.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per sample per line (default: a table per sample)",
    )
    watch.add_argument(
        "--pid",
        type=pid,
        metavar="PID",
        help=(
            "watch this process: its I/O and the share of its time spent waiting on each "
            "PATH (default: none; e.g. --pid 4242)"
        ),
    )
    watch.add_argument(
        "--no-attach",
        dest="attach",
        action="store_false",
        help=(
            "sample here even when a Jupyter server of yours with trainwatch_lab runs (default: "
            "PATHs are watched by that server's sampler and shown as its panel shows them)"
        ),
    )
    add_notify(watch)
    add_record(watch, DEFAULT_EVERY["watch"])


def attached_sampler(args: argparse.Namespace, paths: list[str]) -> Any:
    """The sampler of a Jupyter server of ours (one watcher per machine), or None: only for
    PATHs, at its interval, with nothing asked that only a sampler here does (a process to
    watch, discovery, a recording of our own)."""
    from ..core.attach.link import HubLink, LinkError
    from ..core.attach.wire import runtime_dir, runtime_name
    from ..monitor import make_attached_sampler

    if not (args.attach and paths) or args.pid or args.processes or args.record:
        return None
    try:
        link = HubLink(runtime_name(runtime_dir()))
    except LinkError:
        return None
    if not link.serves(args.interval, probe=True):
        link.close()
        return None
    print(
        f"trainwatch: watching with the Jupyter server's sampler (pid {link.server_pid}): the "
        "same samples and warnings as its panel (--no-attach samples here)",
        file=sys.stderr,
    )
    return make_attached_sampler(link, paths, pid=None)


def _drain(samples: queue.Queue[Sample], emit: Callable[[Sample], None], end: float | None) -> int:
    """Print samples until ``end`` (or an exception), and at least one: a first tick slower
    than a short ``--duration`` (helpers starting on a loaded machine) must not end a run
    with nothing printed. The worst severity rank seen."""
    worst, printed = 0, False
    while True:
        wait = 0.5 if end is None else min(0.5, end - time.monotonic())
        if wait <= 0 and printed:
            return worst
        wait = max(wait, 0.05)
        try:
            sample = samples.get(timeout=wait)
        except queue.Empty:
            continue
        emit(sample)
        printed = True
        worst = max([worst, *(SEVERITY_RANK[a.severity] for a in sample.warnings)])


def run(args: argparse.Namespace) -> int:
    """Exit 1 when a warning was raised, 0 when none, 130/143 on Ctrl-C/SIGTERM."""
    paths = user_paths(args.paths)
    refuse_impossible(paths)
    store = store_path(args) if args.record else None
    from ..monitor import make_sampler

    # no path: what trains on this machine is what to watch (an agent on a cluster node)
    processes = args.processes or not paths
    notify = notifier(args)
    sampler = attached_sampler(args, paths) or make_sampler(
        paths, pid=args.pid, interval=args.interval, processes=processes
    )
    if notify is not None:
        sampler.subscribe(notify)
    samples: queue.Queue[Sample] = queue.Queue(maxsize=1000)

    def enqueue(sample: Sample) -> None:
        # the terminal cannot keep up: drop, never block the sampler
        with contextlib.suppress(queue.Full):
            samples.put_nowait(sample)

    emit = json_line if args.json else WatchPrinter(sampler, sys.stdout)
    sampler.subscribe(enqueue)
    recorder = start_recorder(args, sampler, "watch", store, notify)
    end = time.monotonic() + args.duration if args.duration else None
    worst = 0
    code = 0

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated

    in_main = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, on_term) if in_main else None
    try:
        sampler.start()
        worst = _drain(samples, emit, end)
    except KeyboardInterrupt:
        code = 130
    except _Terminated:
        code = 128 + signal.SIGTERM
    finally:
        # a second Ctrl-C must not interrupt the cleanup that removes probe files
        previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        try:
            sampler.close()
            if notify is not None:
                notify.close()
            if recorder is not None:
                recorder.close()
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous_int)
                signal.signal(signal.SIGTERM, previous_term)
    if code:
        return code
    return 1 if worst >= SEVERITY_RANK["warning"] else 0
