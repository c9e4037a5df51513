"""``trainwatch-lab check`` and ``trainwatch-lab watch``: the storage diagnosis in a terminal.

Exit codes: 0 nothing of severity ``warning`` or above, 1 at least one such warning,
2 bad usage (one line on stderr, never a traceback; for ``check`` also a path that can never
exist, verdict ``missing``), 130 interrupted. A path not created yet is no bad usage: it is
judged on the filesystem it will be created on (core.paths.judge), with a note.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NoReturn, TextIO

from .advice.text import fill_columns, fmt_bytes, fmt_ms, fmt_pct, fmt_rate
from .core.defaults import DEFAULTS
from .core.model import SEVERITY_RANK, Alert, Sample, json_safe, path_devices
from .core.paths import normalise, printable

PROG = "trainwatch-lab"


class UsageError(Exception):
    """Bad input: reported as one line and exit code 2."""


class _Terminated(Exception):
    """SIGTERM during ``watch``: stop like Ctrl-C, exit 143."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _interval(text: str) -> float:
    value = _seconds(text)
    if value < DEFAULTS.min_interval_s:
        raise argparse.ArgumentTypeError(
            f"must be at least {DEFAULTS.min_interval_s:g} s (sampling faster costs more than "
            f"it shows), got {text!r}"
        )
    return value


def _add_notify(parser: argparse.ArgumentParser) -> None:
    """``--notify URL [--notify-format F]`` of watch and serve (checked before anything starts)."""
    parser.add_argument(
        "--notify",
        metavar="URL",
        help=(
            "POST to this webhook when a warning starts and when it clears, at most once per "
            "warning per 10 min (default: none; e.g. --notify https://hooks.slack.com/...)"
        ),
    )
    parser.add_argument(
        "--notify-format",
        default="json",
        metavar="F",
        help="json, slack, dingtalk, feishu or wecom (default: json; e.g. --notify-format slack)",
    )


def _notifier(args: argparse.Namespace) -> Any:
    """The Notifier of --notify (None without), or UsageError for a bad URL or format."""
    from .advice.notify import make_notifier

    try:
        return make_notifier(args.notify, args.notify_format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


TOP_EPILOG = """\
examples:
  trainwatch-lab check /mnt/share/runs ~/data   is this storage fit for training logs?
  trainwatch-lab watch /data runs               live, a table per second until Ctrl-C
  trainwatch-lab serve /data                    this node's metrics for Prometheus
  trainwatch-lab rules > trainwatch-rules.yml   alerting rules for Prometheus
  trainwatch-lab mirror /tmp/runs /mnt/runs     copy local logs to a share, as they grow
  trainwatch-lab check --help                   the options of one command, with examples

exit codes of check and watch: 0 no warning, 1 a warning, 2 bad usage (check: or a path
that can never exist), 130 interrupted
"""

CHECK_EPILOG = """\
examples:
  trainwatch-lab check runs/exp1                         a logdir, even one not created yet
  trainwatch-lab check --json /mnt/share | jq .paths     one JSON object, for scripts and CI
  trainwatch-lab check --no-probe --timeout 5 /mnt/nfs   write nothing; wait 5 s for the mount
"""

WATCH_EPILOG = """\
examples:
  trainwatch-lab watch /data runs                          a table per sample until Ctrl-C
  trainwatch-lab watch --interval 0.5 --duration 60 /data  twice a second, for a minute
  trainwatch-lab watch --json /data > samples.jsonl        one JSON object per sample per line
  trainwatch-lab watch                                     the training processes found here
  trainwatch-lab watch --processes /data                   /data and those processes' dirs
  trainwatch-lab watch --pid 4242 /mnt/share/runs          a script's time lost to storage
  trainwatch-lab watch --notify URL --notify-format slack /data   a webhook hears of warnings
"""


def build_parser() -> argparse.ArgumentParser:
    """Every option's help says its default and gives an example, and each command's epilog
    shows it in use: ``--help`` is where a user looks first (issue 11, item 4)."""
    raw = argparse.RawDescriptionHelpFormatter  # keeps the examples' columns
    parser = _Parser(
        prog=PROG,
        description="See where training I/O goes: mounts, probe latency, free space, disks.",
        epilog=TOP_EPILOG,
        formatter_class=raw,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    check = sub.add_parser(
        "check",
        help="diagnose paths once (mount, filesystem, free space, write+fsync latency)",
        description=(
            "Diagnose paths once; a path not created yet is checked where it will be created.\n"
            "Exit 0: no warning; 1: a warning; 2: bad usage or a path that can never exist."
        ),
        epilog=CHECK_EPILOG,
        formatter_class=raw,
    )
    check.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="log, checkpoint or data directories (required; e.g. /mnt/share/runs ~/data)",
    )
    check.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of the table (default: the table)",
    )
    check.add_argument(
        "--no-probe",
        action="store_true",
        help=(
            f"do not write the latency probe ({DEFAULTS.probe_writes} writes of "
            f"{DEFAULTS.probe_block_bytes // 1024} KiB + fsync to a hidden file, removed at "
            "once) (default: probe)"
        ),
    )
    check.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULTS.mount_timeout_s,
        metavar="S",
        help=(
            "give up on a mount that does not answer after S seconds "
            f"(default: {DEFAULTS.mount_timeout_s:g}; e.g. --timeout 5)"
        ),
    )
    watch = sub.add_parser(
        "watch",
        help="sample devices, free space and fill rate live, with warnings as they arise",
        description=(
            "Sample live until Ctrl-C or --duration.\n"
            "Exit 0: no warning was raised; 1: a warning was raised; 130: interrupted."
        ),
        epilog=WATCH_EPILOG,
        formatter_class=raw,
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
            "open for writing) and watch their directories (default: only without PATH)"
        ),
    )
    watch.add_argument(
        "--interval",
        type=_interval,
        default=DEFAULTS.interval_s,
        metavar="S",
        help=(
            f"seconds between samples, at least {DEFAULTS.min_interval_s:g} "
            f"(default: {DEFAULTS.interval_s:g}; e.g. --interval 0.5)"
        ),
    )
    watch.add_argument(
        "--duration",
        type=_seconds,
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
        type=_pid,
        metavar="PID",
        help=(
            "watch this process: its I/O and the share of its time spent waiting on each "
            "PATH (default: none; e.g. --pid 4242)"
        ),
    )
    _add_notify(watch)
    _add_prometheus_commands(sub)
    _add_mirror_command(sub)
    return parser


def _paths(raw: Sequence[str]) -> list[str]:
    out = []
    for p in raw:
        if not p.strip():
            raise UsageError("empty path")
        if "\0" in p:
            raise UsageError(f"path contains a NUL byte: {p!r}")
        out.append(normalise(p))
    return list(dict.fromkeys(out))


def _dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


def _table(rows: list[list[str]], right: AbstractSet[int] = frozenset(), indent: str = "") -> str:
    """Aligned columns; every cell escaped (``printable``): a newline in a name is one row."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return "\n".join(lines)


def _print_alert(alert: Alert, out: TextIO) -> None:
    out.write(f"  [{alert.severity}] {alert.code}: {printable(alert.subject)}\n")
    out.write(f"    {printable(alert.message)}\n")
    out.write(f"    fix: {printable(alert.fix)}\n")


# -- check ----------------------------------------------------------------------------


def _vs_local(p50: float | None, base: float | None) -> str:
    if p50 is None or not base:
        return "-"
    ratio = p50 / base
    if ratio < 0.1:
        return "<0.1x"
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.1f}x"


def _print_check(report: Any, out: TextIO) -> None:
    base = report.baseline.p50_ms if report.baseline is not None else None
    rows = [["PATH", "FS TYPE", "KIND", "FREE", "PROBE p50", "VS LOCAL", "VERDICT"]]
    for state, verdict in zip(report.states, report.verdicts, strict=True):
        if verdict == "not-storage":  # devtmpfs reports the machine's memory: not for logs
            free = "-"
        elif state.total_bytes:
            free = f"{fmt_bytes(state.avail_bytes)} of {fmt_bytes(state.total_bytes)}"
        else:
            free = "?"
        p50 = state.probe.p50_ms if state.probe is not None else None
        if p50 is not None:
            probe = fmt_ms(p50)
        elif state.read_only:
            probe = "read-only"
        else:
            probe = "-"
        kind = state.kind + (", ro" if state.read_only else "")
        rows.append(
            [
                state.path,
                state.fstype or "?",
                kind,
                free,
                probe,
                _vs_local(p50, base),
                verdict,
            ]
        )
    out.write(_table(rows) + "\n")
    if base is not None:
        out.write(f"(probe: 4 KiB write + fsync, median; local disk: {fmt_ms(base)})\n")
    for state in report.states:
        for line in (state.note, state.error if state.responsive else None):
            if line:
                out.write(f"{printable(state.path)}: {printable(line)}\n")
    if report.alerts:
        out.write("\nWarnings:\n")
        for alert in report.alerts:
            _print_alert(alert, out)
    else:
        out.write("\nNo warnings.\n")


def cmd_check(args: argparse.Namespace) -> int:
    paths = _paths(args.paths)
    from .advice.check import run_check  # after validation: bad input costs no imports

    report = run_check(paths, probe=not args.no_probe, timeout=args.timeout)
    if args.json:
        sys.stdout.write(_dumps(report.to_json(), indent=2) + "\n")
    else:
        _print_check(report, sys.stdout)
    for state in report.states:
        if state.path not in report.missing:
            continue
        why = state.error or "does not exist"  # (always said: ELOOP, a file in the way...)
        sys.stderr.write(f"{PROG}: error: {printable(state.path)}: {printable(why)}\n")
    if report.missing:
        return 2
    return report.exit_code


# -- watch ----------------------------------------------------------------------------


class _WatchPrinter:
    """Human output of ``watch``: one block per sample, warnings only when they are new."""

    def __init__(self, sampler: Any, out: TextIO) -> None:
        self.sampler = sampler
        self.out = out
        self.active: set[tuple[str, str]] = set()
        self.noted: set[tuple[str, str]] = set()

    def __call__(self, sample: Sample) -> None:
        out = self.out
        out.write(f"\n{time.strftime('%H:%M:%S', time.localtime(sample.t))}\n")
        for name, text in sorted(sample.notes.items()):
            if (name, text) not in self.noted:
                self.noted.add((name, text))
                out.write(f"  note ({name}): {text}\n")
        devices = path_devices(sample)
        rows = [["DEVICE", "r/s", "w/s", "rMB/s", "wMB/s", "r_await", "w_await", "aqu-sz", "%util"]]
        for dev in devices:
            d = sample.disks.get(dev)
            if d is None:
                continue
            rows.append(
                [
                    dev,
                    f"{d.r_s:.1f}",
                    f"{d.w_s:.1f}",
                    f"{d.rmb_s:.2f}",
                    f"{d.wmb_s:.2f}",
                    f"{d.r_await:.2f}",
                    f"{d.w_await:.2f}",
                    f"{d.aqu_sz:.2f}",
                    f"{d.util:.1f}",
                ]
            )
        if len(rows) > 1:
            out.write(_table(rows, right=set(range(1, 9)), indent="  ") + "\n")
        elif devices and "disks" not in sample.notes:
            out.write(f"  {', '.join(devices)}: measuring (rates need two samples)\n")
        else:
            out.write("  no block device under the watched paths (memory or network fs)\n")
        rows = [["PATH", "FS TYPE", "FREE", "USED", "FILL RATE", "FULL IN"]]
        for path, p in sorted(sample.paths.items()):
            if not p.responsive:
                rows.append([path, p.fstype or "?", "no answer", "", "", ""])
                continue
            rate, ttf = fill_columns(p.fill)
            used = fmt_pct(1 - (p.avail_bytes or 0) / p.total_bytes) if p.total_bytes else "?"
            name = path if p.exists or p.error else f"{path} (not created yet)"
            rows.append([name, p.fstype or "?", fmt_bytes(p.avail_bytes), used, rate, ttf])
        out.write(_table(rows, right={2, 3, 4, 5}, indent="  ") + "\n")
        _print_processes(sample, out)
        _print_waits(sample, out)
        for g in sample.gpus:
            util = "?" if g.util_pct is None else f"{g.util_pct:.0f} %"
            mem = f"{fmt_bytes(g.mem_used_bytes)} of {fmt_bytes(g.mem_total_bytes)}"
            out.write(f"  GPU {g.index} {g.name}: util {util}, memory {mem}\n")
        keys = {a.key for a in sample.warnings}
        for alert in sample.warnings:
            if alert.key not in self.active:
                _print_alert(alert, out)
        self.active = keys
        out.flush()


def _print_processes(sample: Sample, out: TextIO) -> None:
    """One line per training process found: command, GPUs, memory, I/O, where it waits."""
    for p in sample.processes:
        facts = [", ".join(p.reasons)]
        if p.gpus:
            facts.append(f"GPU {','.join(map(str, p.gpus))} {fmt_bytes(p.gpu_mem_bytes)}")
        if p.io is not None:
            facts.append(f"writes {fmt_rate(p.io.write_chars_s)}")
        mt = p.main_thread or {}
        if mt.get("blocked") and mt.get("syscall"):
            where = f" of {mt['fd_path']}" if mt.get("fd_path") else ""
            facts.append(f"blocked in {mt['syscall']}(){where}")
        out.write(f"  pid {p.pid} {printable(p.command)}: {printable('; '.join(facts))}\n")


def _print_waits(sample: Sample, out: TextIO) -> None:
    """``watch --pid``: the share of the last interval the process waited on each path."""
    pr = sample.process
    if pr is None or pr.waits_elsewhere is None:  # not measured
        return
    for who, waits, calls in (
        (f"pid {pr.pid}", pr.waits, pr.wait_calls),
        (f"its {pr.wait_workers} workers", pr.worker_waits, pr.worker_wait_calls),
    ):
        parts = []
        for path, fraction in sorted(waits.items(), key=lambda kv: -kv[1]):
            top = max(calls.get(path, {}).items(), key=lambda kv: kv[1], default=None)
            parts.append(f"{path} {fmt_pct(fraction)}" + (f" ({top[0]})" if top else ""))
        if who.startswith("pid") and pr.waits_elsewhere:
            parts.append(f"other files {fmt_pct(pr.waits_elsewhere)}")
        if not parts:
            continue
        out.write(f"  {who} waiting on storage: {printable(', '.join(parts))}\n")


def _json_line(sample: Sample) -> None:
    sys.stdout.write(_dumps(sample.to_json()) + "\n")
    sys.stdout.flush()


def _refuse_impossible(paths: Sequence[str]) -> None:
    """A path no logdir can ever be created at (a file in the way, a symlink loop, a name too
    long) is bad input, and so is one that is no storage (a device, a FIFO, /proc: see
    ``core.paths.judge``). A path that does not exist yet under a directory is fine, and so
    is a mount that does not answer: that is what ``watch`` is for, it gets its warning."""
    from .core.guard import MountUnresponsive, WorkerFailed, WorkerUnavailable, default_guard
    from .core.paths import locate

    for path in paths:
        try:
            where = locate(path, default_guard(), timeout=DEFAULTS.mount_timeout_s)
        except (MountUnresponsive, WorkerUnavailable, WorkerFailed, LookupError):
            continue
        except OSError as exc:
            raise UsageError(f"{printable(path)}: {exc.strerror or exc}") from None
        if where.refusal is not None:
            raise UsageError(printable(where.refusal))


def cmd_watch(args: argparse.Namespace) -> int:
    paths = _paths(args.paths)
    _refuse_impossible(paths)
    from .monitor import make_sampler

    # no path: what trains on this machine is what to watch (an agent on a cluster node)
    processes = args.processes or not paths
    notifier = _notifier(args)
    sampler = make_sampler(paths, pid=args.pid, interval=args.interval, processes=processes)
    if notifier is not None:
        sampler.subscribe(notifier)
    samples: queue.Queue[Sample] = queue.Queue(maxsize=1000)

    def enqueue(sample: Sample) -> None:
        # the terminal cannot keep up: drop, never block the sampler
        with contextlib.suppress(queue.Full):
            samples.put_nowait(sample)

    emit = _json_line if args.json else _WatchPrinter(sampler, sys.stdout)
    sampler.subscribe(enqueue)
    end = time.monotonic() + args.duration if args.duration else None
    worst = 0
    code = 0

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated

    in_main = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, on_term) if in_main else None
    try:
        sampler.start()
        while True:
            wait = 0.5 if end is None else min(0.5, end - time.monotonic())
            if wait <= 0:
                break
            try:
                sample = samples.get(timeout=wait)
            except queue.Empty:
                continue
            emit(sample)
            worst = max([worst, *(SEVERITY_RANK[a.severity] for a in sample.warnings)])
    except KeyboardInterrupt:
        code = 130
    except _Terminated:
        code = 128 + signal.SIGTERM
    finally:
        # a second Ctrl-C must not interrupt the cleanup that removes probe files
        previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        try:
            sampler.close()
            if notifier is not None:
                notifier.close()
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous_int)
                signal.signal(signal.SIGTERM, previous_term)
    if code:
        return code
    return 1 if worst >= SEVERITY_RANK["warning"] else 0


# -- serve and rules (Prometheus) ---------------------------------------------------------

SERVE_EPILOG = f"""\
examples:
  trainwatch-lab serve /data /ckpt                      metrics at http://THIS-HOST:{DEFAULTS.serve_port}/metrics
  trainwatch-lab serve --listen 127.0.0.1:9999 /data    another address and port
  trainwatch-lab serve --file-sd /shared/prom /data     announce this node to Prometheus (file_sd)
  trainwatch-lab serve --pid 4242 --gpu 0,1 /data       a training process's I/O, two GPUs
  trainwatch-lab serve                                  the training processes found here
  trainwatch-lab serve --processes /data                /data and those processes' dirs
  trainwatch-lab serve --notify URL --notify-format feishu /data   a webhook hears of warnings

Stops cleanly on SIGTERM or Ctrl-C (exit 0); bad usage or a port in use: exit 2.
"""

RULES_EPILOG = """\
examples:
  trainwatch-lab rules > /etc/prometheus/rules/trainwatch.yml
  trainwatch-lab rules --rate-window 2m | promtool check rules /dev/stdin
"""


def _gpu_selection(text: str) -> list[int]:
    """``--gpu``: the one parser every surface shares (core.defaults.parse_gpu_selection)."""
    from .core.defaults import parse_gpu_selection

    try:
        return parse_gpu_selection(text) or []
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gpu ")) from None


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a process id, got {text!r}")
    if not os.path.exists(f"/proc/{int(text)}"):
        raise argparse.ArgumentTypeError(f"no process {text} runs here")
    return int(text)


def _add_prometheus_commands(sub: Any) -> None:
    """``serve`` (the per-node agent) and ``rules`` (alerting rules), one parser each."""
    raw = argparse.RawDescriptionHelpFormatter
    serve = sub.add_parser(
        "serve",
        help="sample this node and serve Prometheus metrics at /metrics (one agent per node)",
        description=(
            "Sample like `watch` and serve the latest sample at /metrics in the Prometheus\n"
            "text format: node_exporter's names for disks and filesystems, trainwatch_* for\n"
            "the rest. One agent per node; runs until SIGTERM or Ctrl-C."
        ),
        epilog=SERVE_EPILOG,
        formatter_class=raw,
    )
    serve.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="paths to watch (default: none, the training processes found here and their dirs)",
    )
    serve.add_argument(
        "--processes",
        action="store_true",
        help="also find training processes and watch their directories (default: without PATH)",
    )
    serve.add_argument(
        "--listen",
        default=f":{DEFAULTS.serve_port}",
        metavar="HOST:PORT",
        help=f"address to serve on (default: :{DEFAULTS.serve_port}, every interface)",
    )
    serve.add_argument(
        "--interval",
        type=_interval,
        default=DEFAULTS.interval_s,
        metavar="S",
        help=f"seconds between samples (default: {DEFAULTS.interval_s:g})",
    )
    serve.add_argument(
        "--no-probe", action="store_true", help="never write the latency probe (default: probe)"
    )
    serve.add_argument(
        "--gpu",
        type=_gpu_selection,
        metavar="0,1|none",
        help="GPU indices to export, or none (default: every GPU)",
    )
    serve.add_argument(
        "--pid",
        type=_pid,
        metavar="PID",
        help="export this process tree's I/O and GPU memory (default: no process)",
    )
    serve.add_argument(
        "--file-sd",
        metavar="DIR",
        help="write a Prometheus file_sd target file for this agent into DIR, removed on exit",
    )
    _add_notify(serve)
    rules = sub.add_parser(
        "rules",
        help="print Prometheus alerting rules that mirror the warnings (YAML)",
        description="Print alerting rules with the thresholds of the defaults, for Prometheus.",
        epilog=RULES_EPILOG,
        formatter_class=raw,
    )
    rules.add_argument(
        "--rate-window",
        default="1m",
        metavar="DURATION",
        help="range of rate() in the disk rules, at least 4 scrape intervals (default: 1m)",
    )


def cmd_rules(args: argparse.Namespace) -> int:
    from .prometheus.rules import rules_yaml

    try:
        text = rules_yaml(DEFAULTS, args.rate_window)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(text)
    return 0


def _start_agent(args: argparse.Namespace, paths: list[str], notifier: Any = None) -> Any:
    """A started agent, or UsageError (one line) for a port in use or an unusable --file-sd."""
    from .monitor import make_sampler
    from .prometheus.agent import Agent, parse_listen

    try:
        host, port = parse_listen(args.listen, DEFAULTS.serve_port)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _refuse_impossible(paths)
    gpus = args.gpu  # None: every GPU; []: none
    sampler = make_sampler(
        paths,
        pid=args.pid,
        # without --pid no process tree is exported: reading the agent's own would cost
        # procfs reads every tick for nothing
        process=args.pid is not None,
        interval=args.interval,
        probe=not args.no_probe,
        gpu=gpus != [],
        processes=args.processes or not paths,
    )
    if notifier is not None:
        sampler.subscribe(notifier)
    agent = Agent(
        sampler,
        host,
        port,
        gpus=gpus or None,
        process=args.pid is not None,
        file_sd_dir=args.file_sd,
        file_sd_timeout=DEFAULTS.mount_timeout_s,
    )
    try:
        return agent.start()
    except OSError as exc:
        sampler.close()
        why = exc.strerror or str(exc)
        if agent.file_sd is not None:
            raise UsageError(f"--file-sd {printable(args.file_sd)}: {why}") from None
        raise UsageError(f"cannot listen on {host or '*'}:{port}: {why}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    paths = _paths(args.paths)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    notifier = _notifier(args)
    try:
        agent = _start_agent(args, paths, notifier)
    except BaseException:
        if notifier is not None:
            notifier.close()
        raise
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        sys.stderr.write(
            f"{PROG}: serving http://{agent.target}/metrics, a sample every "
            f"{args.interval:g} s; stop with Ctrl-C or SIGTERM\n"
        )
        stop.wait()  # a signal's handler sets it: no polling, no CPU while idle
    finally:
        agent.stop()
        if notifier is not None:
            notifier.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


# -- mirror (fix.mirror) ------------------------------------------------------------------

MIRROR_EPILOG = """\
examples:
  trainwatch-lab mirror /tmp/runs /mnt/share/runs                 until Ctrl-C, every 30 s
  trainwatch-lab mirror --every 5 /tmp/runs /mnt/share/runs       every 5 s
  trainwatch-lab mirror --once --timeout 600 /tmp/runs /mnt/runs  one copy, then exit

The share is touched by helper processes only: a share that stops answering never blocks
this command; what it lacks is copied when it answers again. Exit 0: the share holds
everything; 1: something is still to copy (the share did not answer); 2: bad usage.
"""


def _add_mirror_command(sub: Any) -> None:
    """``mirror LOCAL SHARE``: the command-line form of ``trainwatch_lab.fix.local_mirror``."""
    from .fix.mirror import EVERY_S, EXIT_SYNC_S

    mirror = sub.add_parser(
        "mirror",
        help="copy a local log directory to a share in the background (new and grown files)",
        description=(
            "Copy LOCAL to SHARE every S seconds: new files whole, grown files by their new\n"
            "bytes. Runs until SIGTERM or Ctrl-C, then copies what is left (--timeout)."
        ),
        epilog=MIRROR_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        type=_seconds,
        default=EVERY_S,
        metavar="S",
        help=f"seconds between copies (default: {EVERY_S:g}; e.g. --every 5)",
    )
    mirror.add_argument(
        "--once", action="store_true", help="copy once and exit (default: until stopped)"
    )
    mirror.add_argument(
        "--timeout",
        type=_seconds,
        default=EXIT_SYNC_S,
        metavar="S",
        help=f"seconds the last copy may take (default: {EXIT_SYNC_S:g}; e.g. --timeout 600)",
    )


def _start_mirror(args: argparse.Namespace) -> Any:
    """A running Mirror, or UsageError (one line) for a LOCAL or SHARE it cannot use."""
    from .core.guard import default_guard
    from .fix import scratch
    from .fix.mirror import Mirror, check_share

    local, share = normalise(args.local), normalise(args.share)
    why = scratch.local_refusal(local)
    if why is not None:
        raise UsageError(f"LOCAL: {why}")
    if not os.path.isdir(local):  # a local disk: safe to look at from here
        raise UsageError(f"LOCAL {printable(local)} is not a directory")
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


def cmd_mirror(args: argparse.Namespace) -> int:
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    logging.getLogger("trainwatch_lab").addHandler(handler)
    logging.getLogger("trainwatch_lab").setLevel(logging.WARNING)
    mirror = _start_mirror(args)
    if args.once:
        done = mirror.close(timeout=args.timeout)
        sys.stderr.write(f"{PROG}: {mirror.status().text()}\n")
        return 0 if done else 1
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        sys.stderr.write(
            f"{PROG}: mirroring {printable(mirror.local)} to {printable(mirror.share)} every "
            f"{args.every:g} s; stop with Ctrl-C or SIGTERM\n"
        )
        stop.wait()
    finally:
        for signum, handler_ in previous.items():
            signal.signal(signum, handler_)
    done = mirror.close(timeout=args.timeout)
    sys.stderr.write(f"{PROG}: {mirror.status().text()}\n")
    return 0 if done else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "serve":
            return cmd_serve(args)
        if args.command == "rules":
            return cmd_rules(args)
        if args.command == "mirror":
            return cmd_mirror(args)
        return cmd_watch(args)
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `trainwatch-lab watch ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
