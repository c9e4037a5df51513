"""What a ``%trainwatch`` line asks for, and the help that explains it.

Why one table (``FLAGS``): ``%trainwatch --help``, the magic's docstring (``%trainwatch?``),
the usage line and the parser are all built from it, so the help can never list an option
the parser refuses, or miss one it accepts, or show a default the magic does not use.

Why our own small parser rather than argparse: every message here is one line that names
the problem in the user's terms ("--interval needs a value, e.g. ..."), with a close-match
suggestion for a mistyped option; argparse words its errors itself, and they change between
Python versions. Bad input raises UsageError and nothing else: parsing happens before the
running dashboard is touched.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from IPython.core.error import UsageError

from ..advice.notify import FORMATS, check_target
from ..core.defaults import DEFAULTS
from ..core.gpu.select import parse_gpu_selection
from ..core.usage import parse_seconds
from ..core.usage import unknown_option as shared_unknown_option
from .settings import MAX_WINDOW_S, MIN_WINDOW_S, check_settings

HELP_FLAGS = ("-h", "--help")
SEE_HELP = "(see %trainwatch --help)"
MIN_INTERVAL_S = DEFAULTS.min_interval_s
FLAG_NAMES = {"interval": "--interval", "window": "--window"}  # check_settings' wording


def as_typed(seconds: float) -> str:
    """Seconds as a user would type them: ``0.05s``, ``1s``, ``10m``, ``24h``."""
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class Flag:
    """One option as the help shows it; ``metavar`` None is a switch (takes no value)."""

    name: str
    metavar: str | None
    what: str
    default: str
    example: str


PATHS = Flag(
    "PATH ...",
    None,
    "directories to watch (logs, checkpoints, data); they may not exist yet",
    "none (log and checkpoint directories your cells create are added)",
    "%trainwatch runs/exp1 /data/train",
)

FLAGS: tuple[Flag, ...] = (
    Flag(
        "--logdir",
        "PATH",
        "the run's log directory, watched first (same as a PATH)",
        "none",
        "%trainwatch --logdir runs/exp1",
    ),
    Flag(
        "--interval",
        "S",
        f"time between samples: seconds, or 500ms, 2s (at least {as_typed(MIN_INTERVAL_S)})",
        as_typed(DEFAULTS.interval_s),
        "%trainwatch runs --interval 0.5",
    ),
    Flag(
        "--window",
        "SPAN",
        f"time the charts show: 90s, 10m, 1h ({as_typed(MIN_WINDOW_S)} to "
        f"{as_typed(MAX_WINDOW_S)})",
        as_typed(DEFAULTS.window_s),
        "%trainwatch runs --window 1h",
    ),
    Flag(
        "--gpu",
        "0,1|none",
        "GPUs to show: CUDA indices or GPU/MIG UUIDs; none turns GPU monitoring off",
        "all GPUs",
        "%trainwatch runs --gpu 0",
    ),
    Flag(
        "--since",
        "WHEN",
        "replay the recorded history from then: 8h, 2d (ago), 03:00, an ISO time",
        "live",
        "%trainwatch --since 8h",
    ),
    Flag(
        "--until",
        "WHEN",
        "end of the replayed window (same forms as --since)",
        "now",
        "%trainwatch --since 2026-12-01T22:00 --until 2026-12-02T06:00",
    ),
    Flag(
        "--no-probe",
        None,
        "do not write the latency probe (4 KiB writes + fsync to a hidden file, removed)",
        "probe",
        "%trainwatch /mnt/share --no-probe",
    ),
    Flag(
        "--notify",
        "URL",
        "webhook told when a warning starts and when it clears, at most every 10 min",
        "none",
        "%trainwatch runs --notify https://hooks.slack.com/services/...",
    ),
    Flag(
        "--notify-format",
        "F",
        f"the --notify body: {', '.join(FORMATS)}",
        "json",
        "%trainwatch --notify https://open.feishu.cn/... --notify-format feishu",
    ),
)
BY_NAME = {f.name: f for f in FLAGS}

SUBCOMMANDS = {
    "status": "what is watched, how often, and the warnings now",
    "stop": "stop the dashboard and its sampler",
}

EXAMPLES = (
    ("%trainwatch --logdir runs/exp1", "watch a run's logs; its checkpoints are found too"),
    ("%trainwatch /data runs --interval 0.5 --gpu 0", "two paths, twice a second, GPU 0"),
    ("%%trainwatch runs", "(a cell's first line) watch only that cell"),
    ("%trainwatch --since 8h", "replay the last 8 hours: why runs ended, charts"),
    ("%trainwatch status", "what is watched and the warnings now"),
)
REPLAY_FLAGS = ("--since", "--until")


def _usage_parts() -> list[str]:
    parts = ["%trainwatch", f"[{PATHS.name}]"]
    live = [f for f in FLAGS if f.name not in REPLAY_FLAGS]  # a replay has its own line
    return parts + [f"[{f.name}{' ' + f.metavar if f.metavar else ''}]" for f in live]


def usage_line() -> str:
    """``%trainwatch [PATH ...] [--logdir PATH] ...``, from the table."""
    return " ".join(_usage_parts())


def _wrapped_usage(width: int = 88) -> list[str]:
    """The usage line in lines of at most ``width``, never breaking inside a ``[...]``."""
    lines = ["  " + _usage_parts()[0]]
    for part in _usage_parts()[1:]:
        if len(lines[-1]) + 1 + len(part) > width:
            lines.append(" " * 14)
        lines[-1] += ("" if lines[-1].endswith(" ") else " ") + part
    return lines


def _rows(rows: Sequence[tuple[str, str]], width: int) -> list[str]:
    return [f"  {left.ljust(width)}  {right}" for left, right in rows]


def help_text() -> str:
    """The whole help: what ``--help`` prints and ``%trainwatch?`` shows. Plain text."""
    commands = [
        (usage_line(), ""),
        ("%%trainwatch [same options]", "watch just this cell; a summary when it ends"),
        ("%trainwatch --since WHEN [--until WHEN]", "replay the recorded history of this machine"),
        *((f"%trainwatch {name}", what) for name, what in SUBCOMMANDS.items()),
        ("%trainwatch --help", "this help (also -h, or %trainwatch?)"),
    ]
    width = max(len(f.name) + len(f.metavar or "") + 1 for f in (PATHS, *FLAGS))
    lines = [
        "Live storage and GPU charts beside the running cell, and a warning with its fix",
        "when a mount, a disk or the GPU is about to slow or kill training.",
        "",
        "Usage:",
        *_wrapped_usage(),
        *_rows(commands[1:], max(len(c) for c, _ in commands[1:])),
        "",
        "Options:",
    ]
    for flag in (PATHS, *FLAGS):
        left = flag.name if flag.metavar is None else f"{flag.name} {flag.metavar}"
        lines += _rows([(left, flag.what), ("", f"default: {flag.default}")], width)
        lines += _rows([("", f"example: {flag.example}")], width)
    lines += [*_rows([("-h, --help", "show this help")], width), "", "Examples:"]
    lines += _rows(EXAMPLES, max(len(e) for e, _ in EXAMPLES))
    return "\n".join(lines) + "\n"


# -- parsing -------------------------------------------------------------------------------


@dataclass
class Options:
    paths: list[str] = field(default_factory=list)
    logdir: str | None = None
    interval: float = DEFAULTS.interval_s
    window: float = DEFAULTS.window_s
    gpus: list[int | str] | None = None  # None: all GPUs (core.gpu.select selectors)
    gpu: bool = True
    probe: bool = True
    notify_url: str | None = None
    notify_format: str = "json"
    since: str | None = None  # --since/--until: a replay of the recorded history
    until: str | None = None

    @property
    def replay(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def all_paths(self) -> list[str]:
        paths = ([self.logdir] if self.logdir is not None else []) + self.paths
        return list(dict.fromkeys(paths))


@dataclass(frozen=True)
class Request:
    """What one ``%trainwatch`` line asks for; ``options`` is set for ``start`` and
    ``replay`` only."""

    action: Literal["start", "replay", "status", "stop", "help"]
    options: Options | None = None


_NUMBER_LIKE = re.compile(r"^-\.?\d")  # "-1", "-0.5s": a (bad) value, not an option


def parse_duration(text: str, what: str) -> float:
    """``10m``, ``90s``, ``1h``, ``600`` (seconds), ``500ms``, ``-1`` -> seconds. A signed
    number is a number: its range is checked by the caller, which can say what is wrong.
    The same parser as the CLI's (core.usage)."""
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise UsageError(f"trainwatch: {what} {exc}") from None


def parse_interval(text: str) -> float:
    """A duration that the sampler can keep: more than 0 and at least ``min_interval_s``."""
    value = parse_duration(text, "--interval")
    least = MIN_INTERVAL_S
    if not value > 0:  # (also NaN)
        raise UsageError(
            f"trainwatch: --interval must be more than 0 s, got {text.strip()} "
            f"(the shortest is {least:g} s)"
        )
    if value < least:
        raise UsageError(
            f"trainwatch: --interval must be at least {least:g} s, got {text.strip()} "
            "(sampling faster costs more than any chart can show)"
        )
    return value


def parse_gpus(text: str) -> list[int | str] | None:
    """``0,1`` -> [0, 1]; ``0,MIG-4f1c`` -> [0, "MIG-4f1c"] (GPU or MIG UUIDs); ``none``/``off``
    -> [] (GPU monitoring off): the one ``--gpu`` syntax every surface shares
    (core.gpu.select.parse_gpu_selection)."""
    try:
        return parse_gpu_selection(text)
    except ValueError as exc:
        raise UsageError(f"trainwatch: {exc}") from None


def unknown_option(token: str) -> str:
    """One line naming the option, with the closest real one when there is a close one."""
    return f"trainwatch: {shared_unknown_option(token, [*BY_NAME, *HELP_FLAGS])} {SEE_HELP}"


def _takes_value(token: str) -> bool:
    """Whether ``token`` may be the value of the option before it: anything but an option
    (``-1`` is a bad number, which the option's own check words better)."""
    return not token.startswith("-") or token == "-" or bool(_NUMBER_LIKE.match(token))


def split_args(tokens: Sequence[str]) -> tuple[dict[str, str | bool], list[str]]:
    """Tokens -> ({flag: value or True}, paths); the last of a repeated option wins, ``--``
    ends the options (a path may then start with ``-``)."""
    values: dict[str, str | bool] = {}
    paths: list[str] = []
    i = 0
    while i < len(tokens):
        token, i = tokens[i], i + 1
        if token == "--":
            paths.extend(tokens[i:])
            break
        if not token.startswith("-"):
            paths.append(token)
            continue
        name, eq, inline = token.partition("=")
        flag = BY_NAME.get(name)
        if flag is None:
            raise UsageError(unknown_option(token))
        if flag.metavar is None:
            if eq:
                raise UsageError(f"trainwatch: {name} takes no value, got {token!r}")
            values[name] = True
        elif eq:
            values[name] = inline
        elif i < len(tokens) and _takes_value(tokens[i]):
            values[name], i = tokens[i], i + 1
        else:
            raise UsageError(f"trainwatch: {name} needs a value, e.g. {flag.example}")
    return values, paths


def _replay_options(values: dict[str, str | bool], paths: list[str], cell: bool) -> Options:
    """``--since``/``--until`` alone (a replay watches nothing): checked as the replay will
    read them (core.record.replay.window), so a bad time is refused before anything shows."""
    from ..core.record.replay import window

    if cell:
        raise UsageError(
            "trainwatch: --since replays the recorded history: run %trainwatch --since ... "
            "in a line of its own (%%trainwatch watches the cell under it, live)"
        )
    live = [name for name in values if name not in REPLAY_FLAGS] + (["PATH"] if paths else [])
    if live:
        raise UsageError(
            f"trainwatch: {live[0]} is for the live dashboard; --since/--until replay the "
            f"recorded history of the whole machine: use one or the other {SEE_HELP}"
        )
    since, until = values.get("--since"), values.get("--until")
    opts = Options(
        since=since if isinstance(since, str) else None,
        until=until if isinstance(until, str) else None,
    )
    try:
        window(opts.since, opts.until)
    except ValueError as exc:
        text = str(exc)
        for word in ("since", "until"):
            if text.startswith(word):
                text = f"--{text}"
        raise UsageError(f"trainwatch: {text}") from None
    return opts


def _options(values: dict[str, str | bool], paths: list[str]) -> Options:
    logdir = values.get("--logdir")
    opts = Options(
        paths=paths,
        logdir=logdir if isinstance(logdir, str) else None,
        probe="--no-probe" not in values,
    )
    if isinstance(interval := values.get("--interval"), str):
        opts.interval = parse_interval(interval)
    if isinstance(window := values.get("--window"), str):
        opts.window = parse_duration(window, "--window")
    url, fmt = values.get("--notify"), values.get("--notify-format", "json")
    try:
        if isinstance(url, str):
            opts.notify_url, opts.notify_format = check_target(url, str(fmt))
        else:
            opts.notify_format = check_target("http://x", str(fmt))[1]
    except ValueError as exc:
        raise UsageError(f"trainwatch: {exc}") from None
    if isinstance(gpu := values.get("--gpu"), str):
        gpus = parse_gpus(gpu)
        opts.gpu = gpus != []
        opts.gpus = gpus or None
    try:
        _, opts.interval, opts.window = check_settings(
            opts.all_paths, opts.interval, opts.window, names=FLAG_NAMES
        )
    except (ValueError, TypeError) as exc:
        raise UsageError(f"trainwatch: {exc}") from None
    return opts


def _tokens(line: str) -> list[str]:
    try:
        return shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"trainwatch: cannot parse options: {exc} {SEE_HELP}") from None


def parse_request(line: str, cell: bool = False) -> Request:
    """What ``%trainwatch LINE`` (``cell``: ``%%trainwatch LINE``) asks for; UsageError,
    one line, on anything wrong. ``-h``/``--help`` anywhere before ``--`` wins."""
    tokens = _tokens(line)
    options_part = tokens[: tokens.index("--")] if "--" in tokens else tokens
    if any(t in HELP_FLAGS for t in options_part):
        return Request("help")
    if tokens[:1] and tokens[0] in SUBCOMMANDS:
        name = tokens[0]
        if cell:
            raise UsageError(
                f"trainwatch: {name} is a line magic: run %trainwatch {name} in a cell of its "
                "own (%%trainwatch runs the cell under it)"
            )
        if len(tokens) > 1:
            raise UsageError(f"trainwatch: {name} takes no options, got {shlex.join(tokens[1:])!r}")
        return Request("status" if name == "status" else "stop")
    values, paths = split_args(tokens)
    if any(name in values for name in REPLAY_FLAGS):
        return Request("replay", _replay_options(values, paths, cell))
    return Request("start", _options(values, paths))


def parse_options(line: str) -> Options:
    """The options of a line that starts a dashboard (or watches a cell)."""
    request = parse_request(line)
    if request.options is None or request.action != "start":
        raise UsageError(f"trainwatch: {line.strip()!r} starts nothing {SEE_HELP}")
    return request.options


def subcommand_hint(opts: Options) -> str | None:
    """``%trainwatch stauts`` watches a directory named "stauts": legal, and most likely a
    typo. The dashboard starts as asked; this line says what was probably meant."""
    if opts.logdir is not None or len(opts.paths) != 1 or "/" in opts.paths[0]:
        return None
    word = opts.paths[0]
    close = difflib.get_close_matches(word.lower(), SUBCOMMANDS, n=1, cutoff=0.6)
    if not close:
        return None
    return f"trainwatch: watching a directory named {word!r}; did you mean %trainwatch {close[0]}?"
