"""The ``trainwatch-lab`` command: check / watch / serve / rules / dashboard / mirror / history /
run, one module each.

Exit codes: 0 nothing of severity ``warning`` or above, 1 at least one such warning,
2 bad usage (one line on stderr, never a traceback; for ``check`` also a path that can never
exist, verdict ``missing``), 130 interrupted. A path not created yet is no bad usage: it is
judged on the filesystem it will be created on (core.paths.names.judge), with a note.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import check, dashboard, history, mirror, serve, watch
from . import run as run_cmd
from .common import PROG, RAW, Parser, UsageError

__all__ = ["PROG", "build_parser", "main"]

TOP_EPILOG = """\
examples:
  trainwatch-lab check /mnt/share/runs ~/data   is this storage fit for training logs?
  trainwatch-lab watch /data runs               live, a table per second until Ctrl-C
  trainwatch-lab serve /data                    this node's metrics for Prometheus
  trainwatch-lab rules > trainwatch-rules.yml   alerting rules for Prometheus
  trainwatch-lab dashboard > fleet.json         a Grafana dashboard of the fleet
  trainwatch-lab mirror /tmp/runs /mnt/runs     copy local logs to a share, as they grow
  trainwatch-lab watch --record /data           ... and keep it in the recorded history
  trainwatch-lab run -- python train.py         run a script, record how it ends
  trainwatch-lab history why                    why a run ended, from the recorded history
  trainwatch-lab check --help                   the options of one command, with examples

exit codes of check and watch: 0 no warning, 1 a warning, 2 bad usage (check: or a path
that can never exist), 130 interrupted
"""

RUN = {
    "check": check.run,
    "watch": watch.run,
    "serve": serve.run_serve,
    "rules": serve.run_rules,
    "dashboard": dashboard.run,
    "mirror": mirror.run,
    "history": history.run,
    "run": run_cmd.run,
}


def build_parser() -> argparse.ArgumentParser:
    """Every option's help says its default and gives an example, and each command's epilog
    shows it in use: ``--help`` is where a user looks first (issue 11, item 4)."""
    parser = Parser(
        prog=PROG,
        description="See where training I/O goes: mounts, probe latency, free space, disks.",
        epilog=TOP_EPILOG,
        formatter_class=RAW,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    check.add_parser(sub)
    watch.add_parser(sub)
    serve.add_serve_parser(sub)
    serve.add_rules_parser(sub)
    dashboard.add_parser(sub)
    mirror.add_parser(sub)
    history.add_parser(sub)
    run_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: an exit code, never a traceback for bad usage or a closed pipe."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return RUN[args.command](args)
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
