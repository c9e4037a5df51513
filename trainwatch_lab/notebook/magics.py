"""``%trainwatch`` / ``%%trainwatch`` and the per-kernel state behind them.

One live dashboard (and so one sampler) per kernel: running ``%trainwatch`` again replaces
it. After every cell we look for log/checkpoint directories the cell created (discover.py)
and watch them too; one on a shared mount gets an alert right under that cell.

Bad input raises UsageError with one line and changes nothing: options are parsed and every
path is checked before the running dashboard is touched.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import contextlib
import logging
import re
import shlex
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from ..advice.text import warning_count_text
from ..core.defaults import DEFAULTS, Defaults
from ..core.model import Alert
from ..core.paths import normalise
from .discover import Found, discover
from .inline import InlineAlerts, attach, detach
from .settings import check_settings

log = logging.getLogger(__name__)

USAGE = (
    "%trainwatch [PATH ...] [--logdir PATH] [--interval S] [--window 10m] [--gpu 0,1|none] "
    "[--no-probe] | %trainwatch stop | %trainwatch status"
)
FLAG_NAMES = {"interval": "--interval", "window": "--window"}


# -- options ------------------------------------------------------------------------------


@dataclass
class Options:
    paths: list[str] = field(default_factory=list)
    logdir: str | None = None
    interval: float = DEFAULTS.interval_s
    window: float = DEFAULTS.window_s
    gpus: list[int] | None = None  # None: all GPUs
    gpu: bool = True
    probe: bool = True

    @property
    def all_paths(self) -> list[str]:
        paths = ([self.logdir] if self.logdir is not None else []) + self.paths
        return list(dict.fromkeys(paths))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage and sys.exit
        raise UsageError(f"trainwatch: {message}. Usage: {USAGE}")


def _parser() -> _Parser:
    p = _Parser(prog="%trainwatch", add_help=False, allow_abbrev=False)
    p.add_argument("paths", nargs="*")
    p.add_argument("--logdir")
    p.add_argument("--interval")
    p.add_argument("--window")
    p.add_argument("--gpu")
    p.add_argument("--no-probe", action="store_true")
    return p


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0}


def parse_duration(text: str, what: str) -> float:
    """``10m``, ``90s``, ``1h``, ``600`` (seconds), ``500ms`` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(
            f"trainwatch: bad {what} {text!r}: use a number of seconds or e.g. 30s, 10m, 1h"
        )
    value = float(match.group(1))
    unit = (match.group(2) or "").lower() or None
    return value / 1000.0 if unit == "ms" else value * _UNIT_S[unit]


def parse_gpus(text: str) -> list[int] | None:
    """``0,1`` -> [0, 1]; ``none``/``off`` -> [] (GPU monitoring off)."""
    if text.strip().lower() in ("none", "off"):
        return []
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t.isdigit() for t in items):
        raise UsageError(f"trainwatch: bad --gpu {text!r}: use GPU indices like 0 or 0,1 (or none)")
    return sorted(set(int(t) for t in items))


def parse_options(line: str) -> Options:
    """Parse a magic line; raises UsageError (one line) on anything wrong."""
    try:
        argv = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(f"trainwatch: cannot parse options: {exc}") from None
    ns, unknown = _parser().parse_known_args(argv)
    if unknown:
        raise UsageError(f"trainwatch: unknown option {unknown[0]!r}. Usage: {USAGE}")
    opts = Options(paths=list(ns.paths), logdir=ns.logdir, probe=not ns.no_probe)
    bad = [p for p in opts.paths if p.startswith("-")]
    if bad:
        raise UsageError(f"trainwatch: unknown option {bad[0]!r}. Usage: {USAGE}")
    if ns.interval is not None:
        opts.interval = parse_duration(ns.interval, "--interval")
    if ns.window is not None:
        opts.window = parse_duration(ns.window, "--window")
    if ns.gpu is not None:
        gpus = parse_gpus(ns.gpu)
        opts.gpu = gpus != []
        opts.gpus = gpus or None
    try:
        _, opts.interval, opts.window = check_settings(
            opts.all_paths, opts.interval, opts.window, names=FLAG_NAMES
        )
    except (ValueError, TypeError) as exc:
        raise UsageError(f"trainwatch: {exc}") from None
    return opts


# -- immediate check ------------------------------------------------------------------------


def path_notes(paths: Sequence[str]) -> list[str]:
    """One line per path that needs one, as ``trainwatch-lab check`` words it: a logdir not
    created yet is watched where it will be ("not created yet; checked at /mnt/share/runs").
    The paths were accepted already (settings.check_path): a lookup that fails now only
    costs its note."""
    from ..core.paths import locate, printable
    from .settings import PATH_CHECK_TIMEOUT_S

    lines = []
    for path in paths:
        try:
            note = locate(path, timeout=PATH_CHECK_TIMEOUT_S).note
        except Exception:  # a dead mount: the dashboard reports it
            continue
        if note:
            lines.append(f"trainwatch: {printable(normalise(path))}: {printable(note)}")
    return lines


QUICK_CHECK_S = 1.0  # the check's timeout; with its probe budget and slack, <= 2.5 s in all


def immediate_alerts(
    paths: Sequence[str], probe: bool = True, defaults: Defaults = DEFAULTS
) -> list[Alert]:
    """What ``trainwatch-lab check`` says about ``paths`` (shared, slow, unresponsive, full),
    worded as the sampler words it. Runs on the main thread because the alert must land under
    *this* cell, so it is bounded: run_check's threads are abandoned at its deadline (a dead
    mount costs ~2.5 s once, a local disk a few ms)."""
    from ..advice.check import run_check

    if not paths:
        return []
    try:
        report = run_check(list(paths), probe=probe, timeout=QUICK_CHECK_S, defaults=defaults)
    except Exception:  # a bug in a check must not break the user's cell
        log.debug("trainwatch: immediate check failed", exc_info=True)
        return []
    return [a for a in report.alerts if a.severity != "info"]


# -- per-kernel state -----------------------------------------------------------------------


class KernelWatch:
    """Everything ``%load_ext trainwatch_lab`` adds to one kernel."""

    def __init__(self, shell: Any, defaults: Defaults = DEFAULTS) -> None:
        self.shell = shell
        self.defaults = defaults
        self.inline: InlineAlerts | None = attach(shell)
        self.dashboard: Any = None  # the live TrainWatch
        self.options: Options | None = None
        self.discovered: dict[str, Found] = {}
        self._seen_ids: dict[str, int] = {}  # variable -> id(value) after the last cell
        self.started_at: float | None = None
        shell.events.register("post_run_cell", self.post_run_cell)
        atexit.register(self.stop)  # kernel shutdown: release the sampler's helper processes

    def close(self) -> None:
        atexit.unregister(self.stop)
        self.stop()
        with contextlib.suppress(ValueError):
            self.shell.events.unregister("post_run_cell", self.post_run_cell)
        detach(self.shell)

    # -- live dashboard ---------------------------------------------------------------
    def start(self, opts: Options) -> Any:
        from .dashboard import TrainWatch

        paths = [normalise(p) for p in opts.all_paths]
        paths += [p for p in self.discovered if p not in paths]
        dash = TrainWatch(
            paths,
            interval=opts.interval,
            window=opts.window,
            probe=opts.probe,
            gpus=opts.gpus,
            gpu=opts.gpu,
            inline=self.inline or False,
            defaults=self.defaults,
            start=False,
        )
        previous, self.dashboard = self.dashboard, dash
        if previous is not None:
            previous.stop("replaced by a newer %trainwatch")
        self.options = opts
        self.started_at = time.time()
        dash.start()
        dash.show()
        alerts = immediate_alerts(paths, opts.probe, self.defaults)
        if alerts and self.inline is not None:
            self.inline.display_here(alerts, time.time())
        return dash

    def stop(self) -> str:
        dash, self.dashboard = self.dashboard, None
        if dash is None:
            return "trainwatch: not running (start it with %trainwatch [PATH ...])"
        dash.stop("stopped")
        return f"trainwatch: stopped after {dash.samples} samples"

    def status(self) -> str:
        from .summary import latency_text, mount_text

        dash = self.dashboard
        if dash is None:
            return "trainwatch: not running (start it with %trainwatch [PATH ...])"
        opts = self.options or Options()
        latest = dash.sampler.latest
        lines = [
            f"trainwatch: {'paused' if dash.paused else 'live'} since "
            f"{time.strftime('%H:%M:%S', time.localtime(self.started_at or 0))}, every "
            f"{dash.sampler.interval:g} s, window {opts.window:g} s, {dash.samples} samples"
        ]
        paths = dash.paths()
        for p in paths:
            state = latest.paths.get(p) if latest else None
            found = self.discovered.get(p)
            origin = f" (found: {found.where})" if found else ""
            detail = f"{mount_text(state)}; {latency_text(state)}" if state else "no sample yet"
            lines.append(f"  {p}{origin}: {detail}")
        if not paths:
            lines.append("  no watched paths")
        if latest is not None and "gpus" in latest.notes:
            lines.append(f"  GPU: {latest.notes['gpus']}")
        warnings = latest.warnings if latest else []
        lines.append(f"  {warning_count_text(a.severity for a in warnings)}")
        lines.extend(f"  [{a.severity}] {a.code}: {a.subject}" for a in warnings)
        return "\n".join(lines)

    # -- discovery (main thread, after each cell) -------------------------------------
    def post_run_cell(self, result: Any = None) -> None:
        """Look at the variables this cell (re)assigned: a few, not the whole namespace, so
        a notebook with thousands of variables pays microseconds per cell."""
        try:
            ns = self.shell.user_ns
            ids = {n: id(v) for n, v in list(ns.items()) if not n.startswith("_")}
            changed = [n for n, i in ids.items() if self._seen_ids.get(n) != i]
            self._seen_ids = ids
            found = discover(ns, names=changed)
        except Exception:  # discovery must never break the user's cell
            return
        new = [f for f in found if f.path not in self.discovered]
        if not new:
            return
        for f in new:
            self.discovered[f.path] = f
            if self.dashboard is not None:
                with contextlib.suppress(Exception):
                    self.dashboard.add_path(f.path)
        probe = self.options.probe if self.options is not None else True
        alerts = immediate_alerts([f.path for f in new], probe, self.defaults)
        if alerts and self.inline is not None:
            self.inline.display_here(alerts, time.time())

    # -- %%trainwatch -----------------------------------------------------------------
    def run_cell_watched(self, opts: Options, cell: str) -> Any:
        from .cell import CellWatch
        from .dashboard import new_sampler

        paths = [normalise(p) for p in opts.all_paths]
        dash = self.dashboard
        if dash is not None and not dash.stopped:
            sampler, owned = dash.sampler, False
            for p in paths:
                dash.add_path(p)
        else:
            sampler = new_sampler(
                paths + list(self.discovered),
                interval=opts.interval,
                probe=opts.probe,
                gpu=opts.gpu,
                window_s=opts.window,
                defaults=self.defaults,
            )
            owned = True
            if self.inline is not None:
                sampler.subscribe(self.inline.on_sample)
        watched = list(
            dict.fromkeys(
                paths + [p for p in self.discovered] + (dash.paths() if not owned else [])
            )
        )
        watch = CellWatch(sampler, watched, opts.gpus, self.defaults)
        handle = display(watch.strip, display_id=True)
        alerts = immediate_alerts(paths, opts.probe, self.defaults)
        if alerts and self.inline is not None:
            self.inline.display_here(alerts, time.time())
        sampler.start()
        if owned:
            watch.wait_for_baseline(2 * self.defaults.mount_timeout_s + 2 * opts.interval)
        else:  # a running sampler's last sample may be an interval old: take one now
            watch.take_baseline()
        try:
            return run_code(self.shell, cell)
        finally:
            summary = watch.finish()
            if owned:
                sampler.close()
            if handle is not None:
                handle.update(summary)
            else:
                display(summary)
            watch.close()


def run_code(shell: Any, cell: str) -> Any:
    """Run a cell body like ``%%time`` does: IPython syntax transformed, exceptions propagate
    (so the cell fails as it would without the magic), the last expression's value returned."""
    source = shell.transform_cell(cell)
    tree = ast.parse(source)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    glob, loc = shell.user_global_ns, shell.user_ns
    exec(compile(tree, "<trainwatch cell>", "exec"), glob, loc)
    if last is not None:
        return eval(compile(last, "<trainwatch cell>", "eval"), glob, loc)
    return None


# -- the magic ------------------------------------------------------------------------------

_STATES: weakref.WeakKeyDictionary[Any, KernelWatch] = weakref.WeakKeyDictionary()


def state_for(shell: Any) -> KernelWatch:
    state = _STATES.get(shell)
    if state is None:
        state = _STATES[shell] = KernelWatch(shell)
    return state


@magics_class
class TrainWatchMagics(Magics):
    @line_cell_magic
    def trainwatch(self, line: str, cell: str | None = None) -> Any:
        """Live storage + GPU dashboard. Usage:

        %trainwatch [PATH ...] [--logdir PATH] [--interval S] [--window 10m] [--gpu 0,1|none]
                    [--no-probe]
        %trainwatch status | %trainwatch stop
        %%trainwatch [same options]   (watch just this cell; summary at the end)
        """
        state = state_for(self.shell)
        words = line.split()
        if words[:1] in (["stop"], ["status"]):
            if cell is not None or len(words) > 1:
                raise UsageError(f"trainwatch: {words[0]} takes no options. Usage: {USAGE}")
            print(state.stop() if words[0] == "stop" else state.status())
            return None
        opts = parse_options(line)
        for note in path_notes(opts.all_paths):  # (bad paths were refused by parse_options)
            print(note)
        if cell is None:
            state.start(opts)
            return None
        return state.run_cell_watched(opts, cell)


def current(shell: Any = None) -> Any:
    """The live ``%trainwatch`` dashboard of this kernel (a TrainWatch), or None."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    state = _STATES.get(shell) if shell is not None else None
    return state.dashboard if state is not None else None


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(TrainWatchMagics)
    state_for(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    state = _STATES.pop(ipython, None)
    if state is not None:
        state.close()
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("trainwatch", None)
