"""``trainwatch-lab serve`` (this node's Prometheus metrics) and ``rules`` (alerting rules)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.defaults import DEFAULTS
from ..core.paths.names import printable
from .common import (
    PROG,
    RAW,
    UsageError,
    add_notify,
    gpu_selection,
    interval,
    notifier,
    pid_number,
    refuse_impossible,
    require_running,
    stop_signals,
    user_paths,
)
from .record import DEFAULT_EVERY, add_record, start_recorder, store_path

SERVE_EPILOG = f"""\
examples:
  trainwatch-lab serve /data /ckpt                      metrics at http://THIS-HOST:{DEFAULTS.serve_port}/metrics
  trainwatch-lab serve --listen 127.0.0.1:9999 /data    another address and port
  trainwatch-lab serve --file-sd /shared/prom /data     announce this node to Prometheus (file_sd)
  trainwatch-lab serve --pid 4242 --gpu 0,1 /data       a training process's I/O, two GPUs
  trainwatch-lab serve                                  the training processes found here
  trainwatch-lab serve --processes /data                /data and those processes' dirs
  trainwatch-lab serve --notify URL --notify-format feishu /data   a webhook hears of warnings
  trainwatch-lab serve --record /data                   and keep a sample every 10 s on disk
  trainwatch-lab serve --record --record-every 1 --store /var/tmp/h.sqlite /data
  trainwatch-lab serve --path.procfs /host/proc --path.sysfs /host/sys --path.rootfs /host/root \
      --no-probe /data                                  in a container given the host's /proc,
                                                        /sys and / (a DaemonSet: see README)

Stops cleanly on SIGTERM or Ctrl-C (exit 0); bad usage or a port in use: exit 2.
"""

RULES_EPILOG = """\
examples:
  trainwatch-lab rules > /etc/prometheus/rules/trainwatch.yml
  trainwatch-lab rules --rate-window 2m | promtool check rules /dev/stdin
"""


def add_serve_parser(sub: Any) -> None:
    """``serve``: the per-node agent, sampling like ``watch``."""
    serve = sub.add_parser(
        "serve",
        help="sample this node and serve Prometheus metrics at /metrics (one agent per node)",
        description=(
            "Sample like `watch` and serve the latest sample at /metrics in the Prometheus\n"
            "text format: node_exporter's names for disks and filesystems, trainwatch_* for\n"
            "the rest. One agent per node; runs until SIGTERM or Ctrl-C."
        ),
        epilog=SERVE_EPILOG,
        formatter_class=RAW,
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
        type=interval,
        default=DEFAULTS.interval_s,
        metavar="S",
        help=f"seconds between samples (default: {DEFAULTS.interval_s:g})",
    )
    serve.add_argument(
        "--no-probe", action="store_true", help="never write the latency probe (default: probe)"
    )
    serve.add_argument(
        "--gpu",
        type=gpu_selection,
        metavar="0,1|UUID|none",
        help="GPU indices or GPU/MIG UUIDs to export, or none (default: every GPU)",
    )
    serve.add_argument(
        "--pid",
        type=pid_number,  # whether it runs: once --path.procfs is known (run_serve)
        metavar="PID",
        help="export this process tree's I/O and GPU memory (default: no process; with "
        "--path.procfs, a pid of the host)",
    )
    serve.add_argument(
        "--file-sd",
        metavar="DIR",
        help="write a Prometheus file_sd target file for this agent into DIR, removed on exit",
    )
    serve.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="TLS and basic auth, in exporter-toolkit's web config format (node_exporter's "
        "--web.config.file: one file serves both)",
    )
    serve.add_argument(
        "--web.max-requests",
        dest="web_max_requests",
        type=_positive_int,
        default=DEFAULTS.serve_max_requests,
        metavar="N",
        help="requests served at once (an idle connection counts for none), 503 past it "
        f"(default: {DEFAULTS.serve_max_requests})",
    )
    add_host_paths(serve)
    add_notify(serve)
    add_record(serve, DEFAULT_EVERY["serve"])


def add_host_paths(parser: argparse.ArgumentParser) -> None:
    """node_exporter's flags for an agent in a container that is given the host's mounts."""
    for name, default, mounted, what in (
        ("procfs", DEFAULTS.host_procfs, "/host/proc", "the host's procfs: mounts, disks, pids"),
        ("sysfs", DEFAULTS.host_sysfs, "/host/sys", "the host's sysfs: block devices"),
        ("rootfs", DEFAULTS.host_rootfs, "/host/root", "the host's /, where PATHs are looked at"),
    ):
        parser.add_argument(
            f"--path.{name}",
            dest=f"path_{name}",
            default=default,
            metavar="DIR",
            help=f"{what} (default: {default}; in a container e.g. {mounted})",
        )


def use_host_paths(args: argparse.Namespace) -> None:
    """Read the host through ``--path.*`` from now on, or UsageError (one line) for a
    directory that is missing or is not what its flag says."""
    from ..core import hostfs

    try:
        host = hostfs.HostFS(args.path_procfs, args.path_sysfs, args.path_rootfs).checked()
    except ValueError as exc:
        raise UsageError(printable(str(exc))) from None
    hostfs.use(host)


def _positive_int(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 100000, got {text!r}")
    return int(text)


def add_rules_parser(sub: Any) -> None:
    """``rules``: the alerting rules, with the thresholds of core.defaults."""
    rules = sub.add_parser(
        "rules",
        help="print Prometheus alerting rules that mirror the warnings (YAML)",
        description="Print alerting rules with the thresholds of the defaults, for Prometheus.",
        epilog=RULES_EPILOG,
        formatter_class=RAW,
    )
    rules.add_argument(
        "--rate-window",
        default="1m",
        metavar="DURATION",
        help="range of rate() in the disk rules, at least 4 scrape intervals (default: 1m)",
    )


def run_rules(args: argparse.Namespace) -> int:
    """Print the rules' YAML; a bad ``--rate-window`` is a usage error."""
    from ..prometheus.rules.ruleset import rules_yaml

    try:
        text = rules_yaml(DEFAULTS, args.rate_window)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(text)
    return 0


def _start_agent(args: argparse.Namespace, paths: list[str], notify: Any = None) -> Any:
    """A started agent, or UsageError (one line) for a port in use or an unusable --file-sd."""
    from ..monitor import make_sampler
    from ..prometheus import webconfig
    from ..prometheus.agent import Agent, parse_listen
    from ..prometheus.agent_http import Limits

    try:
        host, port = parse_listen(args.listen, DEFAULTS.serve_port)
        web = webconfig.load(args.web_config_file) if args.web_config_file else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    refuse_impossible(paths)
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
    if notify is not None:
        sampler.subscribe(notify)
    agent = Agent(
        sampler,
        host,
        port,
        gpus=gpus or None,
        process=args.pid is not None,
        file_sd_dir=args.file_sd,
        file_sd_timeout=DEFAULTS.mount_timeout_s,
        web_config=web,
        limits=Limits(max_requests=args.web_max_requests),
    )
    try:
        return agent.start()
    except OSError as exc:
        sampler.close()
        why = exc.strerror or str(exc)
        if agent.file_sd is not None:
            raise UsageError(f"--file-sd {printable(args.file_sd)}: {why}") from None
        raise UsageError(f"cannot listen on {host or '*'}:{port}: {why}") from None


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C, then stop the agent (exit 0)."""
    use_host_paths(args)
    if args.pid is not None:
        require_running(args.pid, "--pid")
    paths = user_paths(args.paths)
    notify = notifier(args)
    store = store_path(args) if args.record else None
    try:
        agent = _start_agent(args, paths, notify)
    except BaseException:
        if notify is not None:
            notify.close()
        raise
    recorder = start_recorder(args, agent.sampler, "serve", store, notify)
    with stop_signals() as stop:
        try:
            scheme = "https" if agent.web_config and agent.web_config.context else "http"
            sys.stderr.write(
                f"{PROG}: serving {scheme}://{agent.target}/metrics, a sample every "
                f"{args.interval:g} s; stop with Ctrl-C or SIGTERM\n"
            )
            stop.wait()
        finally:
            agent.stop()
            if notify is not None:
                notify.close()
            if recorder is not None:
                recorder.close()
    return 0
