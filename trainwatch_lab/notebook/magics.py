"""``%trainwatch`` / ``%%trainwatch`` and the per-kernel state behind them.

One live dashboard (and so one sampler) per kernel: running ``%trainwatch`` again replaces
it. After every cell we look for log/checkpoint directories the cell created (discover.py)
and watch them too; one on a shared mount gets an alert right under that cell.

Bad input raises UsageError with one line and changes nothing: options are parsed and every
path is checked (options.py) before the running dashboard is touched; a ``%%trainwatch``
cell body is compiled before its sampler starts.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import logging
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from ..advice.notify import make_notifier
from ..advice.text import warning_count_text
from ..core.defaults import DEFAULTS, Defaults
from ..core.model import Alert
from ..core.paths import normalise
from .discover import Found, discover
from .inline import InlineAlerts, attach, detach
from .options import Options, help_text, parse_options, parse_request, subcommand_hint

__all__ = [  # parse_options and Options stay importable from here (tests, user code)
    "KernelWatch",
    "Options",
    "TrainWatchMagics",
    "current",
    "load_ipython_extension",
    "parse_options",
    "state_for",
    "unload_ipython_extension",
]

log = logging.getLogger(__name__)


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


def mirror_lines() -> list[str]:
    """One status line per ``local_mirror`` of this kernel; none when nothing imported
    fix.mirror (no mirror can exist then, and looking must not import it)."""
    module = sys.modules.get("trainwatch_lab.fix.mirror")
    if module is None:
        return []
    return [f"  {m.status().text()}" for m in module.active_mirrors()]


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
        self.notifier: Any = None  # --notify of the live dashboard
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
        self._close_notifier()
        self.notifier = _subscribe_notifier(dash.sampler, opts)
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
        self._close_notifier()
        if dash is None:
            return "trainwatch: not running (start it with %trainwatch [PATH ...])"
        dash.stop("stopped")
        return f"trainwatch: stopped after {dash.samples} samples"

    def _close_notifier(self) -> None:
        notifier, self.notifier = self.notifier, None
        if notifier is not None:
            notifier.close(timeout=0)

    def status(self) -> str:
        from .summary import latency_text, mount_text

        dash = self.dashboard
        if dash is None:
            idle = "trainwatch: not running (start it with %trainwatch [PATH ...])"
            return "\n".join([idle, *mirror_lines()])
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
        lines.extend(mirror_lines())
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
    def run_cell_watched(self, opts: Options, body: Body) -> Any:
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
        notifier = _subscribe_notifier(sampler, opts)
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
            return run_body(self.shell, body)
        finally:
            summary = watch.finish()
            if owned:
                sampler.close()
            if notifier is not None:
                notifier.close(timeout=0)
            if handle is not None:
                handle.update(summary)
            else:
                display(summary)
            watch.close()


def _subscribe_notifier(sampler: Any, opts: Options) -> Any:
    """The ``--notify`` Notifier on ``sampler`` (options.py checked the URL), or None."""
    if not opts.notify_url:
        return None
    notifier = make_notifier(opts.notify_url, opts.notify_format)
    sampler.subscribe(notifier)
    return notifier


@dataclass(frozen=True)
class Body:
    """A ``%%trainwatch`` cell's code, compiled before anything starts: a syntax error
    costs no sampler, and no strip is left saying "watching" under a cell that never ran."""

    code: CodeType
    last: CodeType | None  # the last expression, whose value the cell shows (Out[n])


def compile_body(shell: Any, cell: str, header: str) -> Body:
    """Compile a cell body as IPython compiles a cell: IPython syntax and AST transformers
    applied, the session's ``__future__`` flags, and a file name IPython knows, so that a
    traceback reads "Cell In[7], line 4" and shows the user's lines. The source is cached
    with the magic line first, so line numbers are those of the cell as the user sees it.

    A syntax error is shown as IPython shows one in a plain cell (where it is, no frames of
    ours), then UsageError fails the cell: raised as is, a SyntaxError would be shown with
    the frames of IPython and this module that compiled it."""
    source = shell.transform_cell(cell)
    name = shell.compile.cache(
        f"{header}\n{source}", shell.execution_count, raw_code=f"{header}\n{cell}"
    )
    try:
        tree = shell.compile.ast_parse("\n" + source, filename=name)
    except SyntaxError:
        shell.showsyntaxerror()
        raise UsageError("trainwatch: the cell was not run: syntax error (above)") from None
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = shell.compile(ast.Expression(tree.body.pop().value), name, "eval")
    return Body(shell.compile(tree, name, "exec"), last)


def run_body(shell: Any, body: Body) -> Any:
    """Run a compiled cell body like ``%%time`` does: in the user's namespace, exceptions
    propagate (so the cell fails as it would without the magic, and a summary still prints),
    the last expression's value returned. What the user sees of an exception starts at their
    own code (``show_from_user_code``)."""
    glob, loc = shell.user_global_ns, shell.user_ns
    try:
        exec(body.code, glob, loc)
        return eval(body.last, glob, loc) if body.last is not None else None
    except BaseException as exc:  # (KeyboardInterrupt too: the user's Ctrl-C)
        show_from_user_code(shell, exc)
        raise


def show_from_user_code(shell: Any, exc: BaseException) -> None:
    """Have IPython show ``exc`` from the user's first frame on, not from the frames of
    IPython and this module that ran the cell body (four of them, before the user's line).

    The exception must still propagate: that is what marks the cell as failed (the kernel
    replies "error", nbclient stops) and what lets ``finally`` print the summary. Python adds
    our frames to its traceback on the way up, so instead of trimming the traceback we use
    IPython's ``_render_traceback_`` protocol: ``showtraceback`` asks the exception for its
    lines. It is set on this one exception and removed once used, so ``%tb`` and ``%debug``
    later still see the whole traceback; an exception that renders itself is left alone."""
    here = exc.__traceback__  # our frame: the exception was caught in run_body
    user = here.tb_next if here is not None else None
    if user is None or hasattr(exc, "_render_traceback_"):
        return

    def render() -> list[str]:
        with contextlib.suppress(AttributeError):
            del exc._render_traceback_  # type: ignore[attr-defined]
        formatter = shell.InteractiveTB
        try:
            return formatter.structured_traceback(type(exc), exc, user, tb_offset=0)
        except Exception:  # never lose the user's error to our formatting: show it all
            return formatter.structured_traceback(type(exc), exc, exc.__traceback__)

    with contextlib.suppress(AttributeError, TypeError):
        exc._render_traceback_ = render  # type: ignore[attr-defined]


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
        request = parse_request(line, cell=cell is not None)
        state = state_for(self.shell)
        if request.action == "help":  # plain text, not an error: the user asked for it
            print(help_text(), end="")
            if cell is not None:
                print("trainwatch: the cell was not run (--help)")
            return None
        if request.action != "start":
            print(state.stop() if request.action == "stop" else state.status())
            return None
        opts = request.options or Options()
        body = None if cell is None else compile_body(self.shell, cell, f"%%trainwatch {line}")
        hint = subcommand_hint(opts)
        for note in ([hint] if hint else []) + path_notes(opts.all_paths):
            print(note)  # (paths that can never be watched were refused by parse_request)
        if body is None:
            state.start(opts)
            return None
        return state.run_cell_watched(opts, body)

    # what %trainwatch? shows: the --help text, from the same table (options.py)
    trainwatch.__doc__ = help_text()


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
