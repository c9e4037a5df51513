"""``%trainwatch`` lines -> what they ask for: options, help built from the one table, and
one exact line for each kind of bad input (issue 11, item 4)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import GpuState
from trainwatch_lab.notebook.magics import TrainWatchMagics
from trainwatch_lab.notebook.options import (
    EXAMPLES,
    FLAGS,
    PATHS,
    SUBCOMMANDS,
    Options,
    help_text,
    parse_duration,
    parse_options,
    parse_request,
    subcommand_hint,
    usage_line,
)

# -- what a good line asks for ----------------------------------------------------------


def test_options_parse(tmp_path: Path) -> None:
    opts = parse_options(
        f"{tmp_path}/a '{tmp_path}/b c' --logdir {tmp_path}/logs --interval 0.5 --window 5m "
        "--gpu 1,0 --no-probe"
    )
    assert opts.paths == [f"{tmp_path}/a", f"{tmp_path}/b c"]
    assert opts.logdir == f"{tmp_path}/logs"
    assert opts.all_paths[0] == f"{tmp_path}/logs"
    assert (opts.interval, opts.window, opts.gpus, opts.gpu, opts.probe) == (
        0.5,
        300.0,
        [0, 1],
        True,
        False,
    )
    assert parse_options("--window 1h --interval 2s").window == 3600.0
    assert parse_options("--interval 500ms").interval == 0.5
    assert parse_options("--interval=0.25 --window=90s").window == 90.0
    assert parse_options("--interval 1 --interval 2").interval == 2.0  # the last one wins
    off = parse_options("--gpu none")
    assert (off.gpu, off.gpus) == (False, None)


def test_a_double_dash_ends_the_options(tmp_path: Path) -> None:
    opts = parse_options(f"--no-probe -- {tmp_path}/-odd --help")
    assert opts.paths == [f"{tmp_path}/-odd", "--help"] and not opts.probe


@pytest.mark.parametrize(
    ("line", "cell", "action"),
    [
        ("--help", False, "help"),
        ("-h", False, "help"),
        ("--help", True, "help"),
        ("runs --interval 2 -h", False, "help"),  # help wins over everything else
        ("status --help", False, "help"),
        ("--interval -1 --help", False, "help"),  # even over an option that is wrong
        ("status", False, "status"),
        ("  stop  ", False, "stop"),
        ("", False, "start"),
        ("", True, "start"),
    ],
)
def test_what_a_line_asks_for(line: str, cell: bool, action: str) -> None:
    assert parse_request(line, cell=cell).action == action


# -- the help: one table, every option with its default and an example -------------------


def test_help_lists_every_option_with_its_default_and_an_example() -> None:
    lines = help_text().splitlines()
    for flag in (PATHS, *FLAGS):
        head = f"{flag.name} {flag.metavar}" if flag.metavar else flag.name
        row = next(i for i, line in enumerate(lines) if line.strip().startswith(head))
        assert flag.what in lines[row]
        assert lines[row + 1].strip() == f"default: {flag.default}"
        assert lines[row + 2].strip() == f"example: {flag.example}"
    assert any(line.strip().startswith("-h, --help") for line in lines)
    for name in SUBCOMMANDS:
        assert any(line.strip().startswith(f"%trainwatch {name} ") for line in lines)
    assert any(line.strip().startswith("%%trainwatch [same options]") for line in lines)
    assert max(len(line) for line in lines) <= 100  # readable in a notebook's output area


def test_usage_line_comes_from_the_table() -> None:
    assert usage_line() == (
        "%trainwatch [PATH ...] [--logdir PATH] [--interval S] [--window SPAN] "
        "[--gpu 0,1|none] [--no-probe] [--notify URL] [--notify-format F]"
    )
    joined = " ".join(line.strip() for line in help_text().splitlines()[4:6])
    assert joined == usage_line()  # wrapped between two [...], never inside one


def test_the_defaults_shown_are_the_defaults_used() -> None:
    shown = {f.name: f.default for f in FLAGS}
    assert parse_duration(shown["--interval"], "x") == Options().interval == DEFAULTS.interval_s
    assert parse_duration(shown["--window"], "x") == Options().window == DEFAULTS.window_s
    assert (Options().gpus, Options().gpu, Options().probe) == (None, True, True)
    assert shown["--gpu"] == "all GPUs" and shown["--no-probe"] == "probe"


@pytest.mark.parametrize("example", [f.example for f in (PATHS, *FLAGS)] + [e for e, _ in EXAMPLES])
def test_every_example_in_the_help_parses(example: str) -> None:
    magic, line = example.split(" ", 1)
    assert magic in ("%trainwatch", "%%trainwatch")
    request = parse_request(line, cell=magic == "%%trainwatch")
    assert request.action in ("start", "replay", *SUBCOMMANDS)
    if request.options is not None:
        for word in shlex.split(line):
            if word.startswith("--"):
                assert word in {f.name for f in FLAGS}


def test_the_docstring_is_the_help() -> None:
    """``%trainwatch?`` shows the magic's docstring: the same text as ``--help``."""
    assert TrainWatchMagics.trainwatch.__doc__ == help_text()


# -- bad input: one line that names the problem ----------------------------------------

SEE = "(see %trainwatch --help)"
BAD_LINES = {
    "unknown flag": ("--frobnicate", f"trainwatch: unknown option '--frobnicate' {SEE}"),
    "unknown short flag": ("-x", f"trainwatch: unknown option '-x' {SEE}"),
    "misspelt flag": (
        "--intervall 5",
        f"trainwatch: unknown option '--intervall', did you mean --interval? {SEE}",
    ),
    "abbreviated flag": (
        "--int 5",
        f"trainwatch: unknown option '--int', did you mean --interval? {SEE}",
    ),
    "underscore": (
        "--no_probe",
        f"trainwatch: unknown option '--no_probe', did you mean --no-probe? {SEE}",
    ),
    "misspelt flag with =": (
        "--windw=5m",
        f"trainwatch: unknown option '--windw', did you mean --window? {SEE}",
    ),
    "interval zero": (
        "--interval 0",
        "trainwatch: --interval must be more than 0 s, got 0 (the shortest is 0.05 s)",
    ),
    "interval negative": (
        "--interval -1",
        "trainwatch: --interval must be more than 0 s, got -1 (the shortest is 0.05 s)",
    ),
    "interval too fast": (
        "--interval 10ms",
        "trainwatch: --interval must be at least 0.05 s, got 10ms "
        "(sampling faster costs more than any chart can show)",
    ),
    "interval text": (
        "--interval fast",
        "trainwatch: --interval must be a number of seconds or a duration like 500ms, 30s, "
        "10m, 1h; got 'fast'",
    ),
    "interval missing": (
        "--interval",
        "trainwatch: --interval needs a value, e.g. %trainwatch runs --interval 0.5",
    ),
    "interval followed by an option": (
        "--interval --no-probe",
        "trainwatch: --interval needs a value, e.g. %trainwatch runs --interval 0.5",
    ),
    "switch given a value": (
        "--no-probe=yes",
        "trainwatch: --no-probe takes no value, got '--no-probe=yes'",
    ),
    "window unit": (
        "--window 10x",
        "trainwatch: --window must be a number of seconds or a duration like 500ms, 30s, 10m, "
        "1h; got '10x'",
    ),
    "window negative": ("--window -5m", "trainwatch: --window must be between 10s and 24h"),
    "window too small": ("--window 5s", "trainwatch: --window must be between 10s and 24h"),
    "window too large": ("--window 48h", "trainwatch: --window must be between 10s and 24h"),
    "window vs interval": (
        "--window 10s --interval 8",
        "trainwatch: --window (10 s) must hold at least two samples of --interval (8 s)",
    ),
    "window too many samples": (
        "--window 24h --interval 0.1",
        "trainwatch: --window 86400 s at --interval 0.1 s would keep more than 86400 samples",
    ),
    "gpu letters": (
        "--gpu a",
        "trainwatch: --gpu takes GPU indices like 0 or 0,1, UUIDs like GPU-8f3a or MIG-4f1c, "
        "or none; got 'a'",
    ),
    "gpu empty item": ("--gpu 0,,1", "trainwatch: --gpu takes GPU indices like 0 or 0,1"),
    "gpu negative": ("--gpu -1", "trainwatch: --gpu takes GPU indices like 0 or 0,1"),
    "logdir missing": (
        "--logdir",
        "trainwatch: --logdir needs a value, e.g. %trainwatch --logdir runs/exp1",
    ),
    "logdir followed by a mistyped option": (
        "--logdir --intervall 5",
        "trainwatch: --logdir needs a value, e.g. %trainwatch --logdir runs/exp1",
    ),
    "bad quoting": (
        "'unterminated",
        f"trainwatch: cannot parse options: No closing quotation {SEE}",
    ),
    "nul byte in path": ("a\x00b", "trainwatch: bad path"),
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_bad_input_is_one_line_that_names_the_problem(name: str) -> None:
    line, expected = BAD_LINES[name]
    with pytest.raises(UsageError) as err:
        parse_options(line)
    message = str(err.value)
    assert message.startswith(expected)
    assert "\n" not in message
    assert "Usage:" not in message  # (the usage line is in --help, not in every error)


@pytest.mark.parametrize(
    ("line", "cell", "expected"),
    [
        ("status --interval 1", False, "trainwatch: status takes no options, got '--interval 1'"),
        ("stop now please", False, "trainwatch: stop takes no options, got 'now please'"),
        (
            "stop",
            True,
            "trainwatch: stop is a line magic: run %trainwatch stop in a cell of its own "
            "(%%trainwatch runs the cell under it)",
        ),
    ],
)
def test_subcommands_take_no_options(line: str, cell: bool, expected: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_request(line, cell=cell)
    assert str(err.value) == expected


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("stauts", "did you mean %trainwatch status?"),
        ("Stop", "did you mean %trainwatch stop?"),
        ("runs", None),
        ("./stats", None),  # a path, clearly
        ("stats runs", None),
    ],
)
def test_a_mistyped_subcommand_gets_a_hint(line: str, hint: str | None) -> None:
    found = subcommand_hint(parse_options(line))
    assert (found is None) if hint is None else (found is not None and found.endswith(hint))


def test_gpu_takes_gpu_and_mig_uuids() -> None:
    """``%trainwatch --gpu`` shares core.gpu.select's syntax: indices and UUIDs."""
    opts = parse_options("--gpu MIG-4f1c,1,GPU-8f3a")
    assert (opts.gpu, opts.gpus) == (True, [1, "MIG-4f1c", "GPU-8f3a"])
    assert GpuState(1, 1, "GPU-zz", "H100") in opts.gpus
    assert GpuState(0, 0, "GPU-8F3A-0000", "H100") in opts.gpus
