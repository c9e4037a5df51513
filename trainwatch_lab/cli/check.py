"""``trainwatch-lab check PATH...``: diagnose paths once, as a table or one JSON object."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..advice.storage import comparison, same_storage, storage_of
from ..advice.text import fmt_bytes, fmt_ms
from ..core.defaults import DEFAULTS
from ..core.model import PathState, ProbeResult
from ..core.paths.names import printable
from .common import PROG, RAW, dumps, print_alert, seconds, table, user_paths

EPILOG = """\
examples:
  trainwatch-lab check runs/exp1                         a logdir, even one not created yet
  trainwatch-lab check --json /mnt/share | jq .paths     one JSON object, for scripts and CI
  trainwatch-lab check --no-probe --timeout 5 /mnt/nfs   write nothing; wait 5 s for the mount
  trainwatch-lab check --no-attach /data                 checked here, JupyterLab or not
"""


def add_parser(sub: Any) -> None:
    """The ``check`` subcommand: every option says its default and gives an example."""
    check = sub.add_parser(
        "check",
        help="diagnose paths once (mount, filesystem, free space, write+fsync latency)",
        description=(
            "Diagnose paths once; a path not created yet is checked where it will be created.\n"
            "Exit 0: no warning; 1: a warning; 2: bad usage or a path that can never exist."
        ),
        epilog=EPILOG,
        formatter_class=RAW,
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
        type=seconds,
        default=DEFAULTS.mount_timeout_s,
        metavar="S",
        help=(
            "give up on a mount that does not answer after S seconds "
            f"(default: {DEFAULTS.mount_timeout_s:g}; e.g. --timeout 5)"
        ),
    )
    check.add_argument(
        "--no-attach",
        dest="attach",
        action="store_false",
        help=(
            "check here even when a Jupyter server of yours with trainwatch_lab runs "
            "(default: that server checks, with what it knows of mounts that hang already)"
        ),
    )


def vs_local(state: PathState, baseline: ProbeResult | None) -> str:
    """The probe's median as a multiple of the local reference's, compared as slow-mount
    compares (advice.storage): with the reference measured at the same moment when there
    is one, and never with the storage the path is on (the home disk against itself read
    0.1x, 1.6x, <0.1x across runs). ``-`` when there is nothing different to compare with."""
    probe = state.probe
    if probe is None or probe.p50_ms is None:
        return "-"
    ref = comparison(probe, baseline)
    if ref is None or not ref.p50_ms or same_storage(state, ref):
        return "-"
    ratio = probe.p50_ms / ref.p50_ms
    if ratio < 0.1:
        return "<0.1x"
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.1f}x"


def _row(state: PathState, verdict: str, baseline: ProbeResult | None) -> list[str]:
    """One path's row of the check table (a path that can never exist: its name and
    verdict only; what its ancestor's filesystem says is not about it)."""
    if verdict == "missing":
        return [state.path, "-", "-", "-", "-", "-", verdict]
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
    return [state.path, state.fstype or "?", kind, free, probe, vs_local(state, baseline), verdict]


def print_check(report: Any, out: TextIO) -> None:
    """The human report: the table, the notes and errors, then the warnings. A path that
    can never exist is said once, on stderr (``run``): with no other path, nothing here."""
    missing = set(report.missing)
    if all(s.path in missing for s in report.states):
        return
    baseline = report.baseline
    rows = [["PATH", "FS TYPE", "KIND", "FREE", "PROBE p50", "VS LOCAL", "VERDICT"]]
    for state, verdict in zip(report.states, report.verdicts, strict=True):
        rows.append(_row(state, verdict, baseline))
    out.write(table(rows) + "\n")
    if baseline is not None and baseline.p50_ms is not None:
        out.write(
            f"(probe: 4 KiB write + fsync, median; local disk: {fmt_ms(baseline.p50_ms)} on "
            f"{storage_of(baseline)}, not compared with paths on that disk)\n"
        )
    for state in report.states:
        if state.path in missing:
            continue
        for line in (state.note, state.error if state.responsive else None):
            if line:
                out.write(f"{printable(state.path)}: {printable(line)}\n")
    if report.alerts:
        out.write("\nWarnings:\n")
        for alert in report.alerts:
            print_alert(alert, out)
    else:
        out.write(f"\nNo warnings{' for the other paths' if missing else ''}.\n")


def checked_by_server(paths: list[str], probe: bool, timeout: float) -> Any | None:
    """The report of the Jupyter server of ours that runs the machine's one sampler (issue
    33): its guard already knows a share that hangs, and no helper starts here. None when
    there is no such server, or it did not answer in time: then the check runs here."""
    from ..advice.check import check_budget_s, report_from_wire
    from ..core.attach.link import HubLink, LinkError
    from ..core.attach.wire import runtime_dir, runtime_name

    try:
        link = HubLink(runtime_name(runtime_dir()))
    except LinkError:
        return None
    try:
        # the server's own budget for a check, and a margin for its loop and the wire
        wait = check_budget_s(timeout) + DEFAULTS.attach_check_margin_s
        answer = link.check(paths, probe, timeout, wait=wait)
    finally:
        link.close()
    if not isinstance(answer, dict) or "error" in answer:
        why = answer.get("error") if isinstance(answer, dict) else "no answer in time"
        print(
            f"trainwatch: the Jupyter server could not check ({why}); checking here",
            file=sys.stderr,
        )
        return None
    print(
        f"trainwatch: checked by the Jupyter server's sampler (pid {link.server_pid}), as its "
        "panel's check would (--no-attach checks here)",
        file=sys.stderr,
    )
    return report_from_wire(answer)


def run(args: argparse.Namespace) -> int:
    """Exit 2 for a path that can never exist, else the report's exit code."""
    paths = user_paths(args.paths)
    from ..advice.check import run_check  # after validation: bad input costs no imports

    report = None
    if args.attach:
        report = checked_by_server(paths, not args.no_probe, args.timeout)
    if report is None:
        report = run_check(paths, probe=not args.no_probe, timeout=args.timeout)
    if args.json:
        sys.stdout.write(dumps(report.to_json(), indent=2) + "\n")
    else:
        print_check(report, sys.stdout)
    for state in report.states:
        if state.path not in report.missing:
            continue
        why = state.error or "does not exist"  # (always said: ELOOP, a file in the way...)
        sys.stderr.write(f"{PROG}: error: {printable(state.path)}: {printable(why)}\n")
    if report.missing:
        return 2
    return report.exit_code
