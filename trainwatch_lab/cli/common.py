"""What every ``trainwatch-lab`` command shares: usage errors, argument types, the path
list, JSON and table output, the refusal of impossible paths and the wait for a signal."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NoReturn, TextIO

from ..core import hostfs
from ..core.defaults import DEFAULTS
from ..core.model import Alert, json_safe
from ..core.paths.names import normalise, printable
from ..core.usage import parse_seconds, unknown_option

PROG = "trainwatch-lab"
RAW = argparse.RawDescriptionHelpFormatter  # keeps the epilogs' example columns


class UsageError(Exception):
    """Bad input: reported as one line and exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are UsageError (one line, exit 2), never SystemExit;
    an unknown option names the closest real one of its command, as the magic does."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        typo = next((e for e in extras if e.startswith("-") and len(e) > 1), None)
        if typo is not None:
            self.error(unknown_option(typo, self._options_of(parsed)))
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _options_of(self, parsed: argparse.Namespace) -> list[str]:
        """The long options of the command that was given (or of this parser)."""
        parser: argparse.ArgumentParser = self
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = getattr(parsed, action.dest or "", None)
                parser = action.choices.get(chosen, self) if chosen else self
        return [o for o in parser._option_string_actions if o.startswith("--")]


class IntermixedParser(Parser):
    """A command whose positionals may follow its options, as users type them
    (``history why --since 1h train.py``): argparse's intermixed parsing, for a command
    without subcommands or REMAINDER arguments."""

    _inside = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        if self._inside:  # (the intermixed parse calls this twice itself)
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def add_intermixed(sub: Any, name: str, **kw: Any) -> IntermixedParser:
    """``sub.add_parser(name, **kw)``, as an IntermixedParser."""
    made_by = sub._parser_class
    sub._parser_class = IntermixedParser
    try:
        return sub.add_parser(name, **kw)  # type: ignore[no-any-return]
    finally:
        sub._parser_class = made_by


def seconds(text: str) -> float:
    """A positive, finite duration (``--timeout``, ``--duration``, ``--every``): seconds, or
    ``500ms``, ``2s``, ``10m``, ``1h`` as the magic takes them (core.usage)."""
    try:
        value = parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def interval(text: str) -> float:
    """``--interval``: seconds, but not below the sampler's floor (core.defaults)."""
    value = seconds(text)
    if value < DEFAULTS.min_interval_s:
        raise argparse.ArgumentTypeError(
            f"must be at least {DEFAULTS.min_interval_s:g} s (sampling faster costs more than "
            f"it shows), got {text!r}"
        )
    return value


def pid_number(text: str) -> int:
    """``--pid``'s form: a process id."""
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a process id, got {text!r}")
    return int(text)


def runs_here(number: int) -> bool:
    """Whether process ``number`` runs on the host now (its procfs: core.hostfs)."""
    return os.path.exists(hostfs.current().proc(number))


def pid(text: str) -> int:
    """``--pid``: a process that runs here now."""
    number = pid_number(text)
    if not runs_here(number):
        raise argparse.ArgumentTypeError(f"no process {text} runs here")
    return number


def require_running(number: int, flag: str) -> None:
    """``pid``'s check where the procfs is known only after parsing (``serve --path.procfs``)."""
    if not runs_here(number):
        raise UsageError(f"argument {flag}: no process {number} runs here")


def gpu_selection(text: str) -> list[int | str]:
    """``--gpu``: the one parser every surface shares (core.gpu.select.parse_gpu_selection)."""
    from ..core.gpu.select import parse_gpu_selection

    try:
        return parse_gpu_selection(text) or []
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gpu ")) from None


def add_notify(parser: argparse.ArgumentParser) -> None:
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


def notifier(args: argparse.Namespace) -> Any:
    """The Notifier of --notify (None without), or UsageError for a bad URL or format."""
    from ..advice.notify import make_notifier

    try:
        return make_notifier(args.notify, args.notify_format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def user_paths(raw: Sequence[str]) -> list[str]:
    """The PATH arguments, normalised like every surface does (core.paths.names.normalise), once
    each."""
    out = []
    for p in raw:
        if not p.strip():
            raise UsageError("empty path")
        if "\0" in p:
            raise UsageError(f"path contains a NUL byte: {p!r}")
        out.append(normalise(p))
    return list(dict.fromkeys(out))


def refuse_impossible(paths: Sequence[str]) -> None:
    """A path no logdir can ever be created at (a file in the way, a symlink loop, a name too
    long) is bad input, and so is one that is no storage (a device, a FIFO, /proc: see
    ``core.paths.names.judge``). A path that does not exist yet under a directory is fine, and so
    is a mount that does not answer: that is what ``watch`` is for, it gets its warning."""
    from ..core.guard.guard import MountUnresponsive, WorkerFailed, WorkerUnavailable, default_guard
    from ..core.paths.names import locate

    for path in paths:
        try:
            where = locate(path, default_guard(), timeout=DEFAULTS.mount_timeout_s)
        except (MountUnresponsive, WorkerUnavailable, WorkerFailed, LookupError):
            continue
        except OSError as exc:
            raise UsageError(f"{printable(path)}: {exc.strerror or exc}") from None
        if where.refusal is not None:
            raise UsageError(printable(where.refusal))


def dumps(obj: Any, **kw: Any) -> str:
    """Strict JSON (no NaN) of anything the model holds."""
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


def table(rows: list[list[str]], right: AbstractSet[int] = frozenset(), indent: str = "") -> str:
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


def print_alert(alert: Alert, out: TextIO) -> None:
    """A warning as three lines: severity and code, the message, the fix."""
    out.write(f"  [{alert.severity}] {alert.code}: {printable(alert.subject)}\n")
    out.write(f"    {printable(alert.message)}\n")
    out.write(f"    fix: {printable(alert.fix)}\n")


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """An Event that SIGTERM or SIGINT sets while the block runs (``serve``, ``mirror``): the
    command waits on it, no polling, no CPU while idle; the handlers are restored on exit, so
    a second Ctrl-C during the cleanup inside the block only sets the Event again."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
