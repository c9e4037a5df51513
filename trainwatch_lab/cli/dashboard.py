"""``trainwatch-lab dashboard``: print the fleet's Grafana dashboard (prometheus.dashboard)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.defaults import DEFAULTS
from .common import RAW, UsageError

EPILOG = """\
examples:
  trainwatch-lab dashboard > trainwatch-fleet.json     then Grafana: Dashboards > New > Import
  trainwatch-lab dashboard --rate-window 2m            match `trainwatch-lab rules --rate-window 2m`

It reads the recording rules `trainwatch-lab rules` prints: load them in Prometheus first,
with the same --rate-window.
"""


def add_parser(sub: Any) -> None:
    dashboard = sub.add_parser(
        "dashboard",
        help="print a Grafana dashboard of the fleet (JSON)",
        description="Print a Grafana dashboard of the fleet: per-host verdicts, storage tax, "
        "fill and time to full, GPU stalls.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    dashboard.add_argument(
        "--rate-window",
        default="1m",
        metavar="DURATION",
        help="the --rate-window the rules were printed with (default: 1m; e.g. --rate-window 2m)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the dashboard's JSON; a bad ``--rate-window`` is a usage error."""
    from ..prometheus.dashboard import dashboard_json

    try:
        text = dashboard_json(args.rate_window, DEFAULTS)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(text)
    return 0
