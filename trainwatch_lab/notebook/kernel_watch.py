"""The per-kernel state behind ``%trainwatch`` / ``%%trainwatch``.

One live dashboard (and so one sampler) per kernel: running ``%trainwatch`` again replaces
it. After every cell we look for log/checkpoint directories the cell created (discover.py)
and watch them too; one on a shared mount gets a warning right under that cell.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from IPython.display import display

from ..advice.notify import make_notifier
from ..advice.text import warning_count_text
from ..core.attach.wire import ENV
from ..core.defaults import DEFAULTS, Defaults
from ..core.model import Alert
from ..core.paths.names import normalise
from ..fix import report as fix_report
from .cell.run import Body, run_body
from .discover import Found, discover
from .fix_status import mirror_lines
from .inline import InlineAlerts, attach, detach
from .log_lines import CellLogHandler
from .options import Options
from .quick_check import check_and_show
from .warnings_html import SEVERITY_LABEL, sort_alerts

NOT_RUNNING = "trainwatch: not running (start it with %trainwatch [PATH ...])"


def scope_text(paths: int) -> str:
    """What a notebook's views cover (the panel covers the whole machine): "this notebook's
    2 paths"."""
    return f"this notebook's {paths} path{'s' * (paths != 1)}" if paths else "no paths yet"


def sampler_text(sampler: Any) -> str:
    """Whose sampler a dashboard reads: the Jupyter server's (one per machine) or this
    kernel's own, and why."""
    hub = sampler.find_source("paths")
    link = getattr(hub, "link", None)
    if link is None:
        if os.environ.get(ENV):
            return (
                "in this kernel (its --interval or --no-probe is not the Jupyter server's "
                "sampler; without them it reads the server's)"
            )
        return "in this kernel (no Jupyter server with trainwatch_lab to attach to)"
    if link.closed:
        return "the Jupyter server's, which has gone: run %trainwatch again"
    return (
        f"the Jupyter server's (pid {link.server_pid}), shared with the panel and every "
        "notebook on this machine"
    )


def warning_lines(warnings: Sequence[Alert], paths: int, gpu_line: bool = False) -> list[str]:
    """The warnings of ``%trainwatch status``: the dashboard's, each in its own sentence with
    its fix; notes in words (the GPU note only when no GPU line said it already)."""
    lines = [f"  {scope_text(paths)}: {warning_count_text(a.severity for a in warnings)}"]
    for a in sort_alerts(warnings):
        if a.severity == "info":
            if not (gpu_line and a.code == "gpu-unavailable"):
                lines.append(f"  note: {a.message}")
            continue
        lines.append(f"  {SEVERITY_LABEL[a.severity]} [{a.code}] {a.message}")
        lines.append(f"    fix: {a.fix}")
    return lines


def subscribe_notifier(sampler: Any, opts: Options) -> Any:
    """The ``--notify`` Notifier on ``sampler`` (options.py checked the URL), or None. It
    also hears what training code says itself (fix.report.notify: a save paused for space)
    until ``close_notifier``."""
    if not opts.notify_url:
        return None
    notifier = make_notifier(opts.notify_url, opts.notify_format)
    sampler.subscribe(notifier)
    fix_report.add_channel(notifier.send)
    return notifier


def close_notifier(notifier: Any) -> None:
    if notifier is not None:
        fix_report.remove_channel(notifier.send)
        notifier.close(timeout=0)


class KernelWatch:
    """Everything ``%load_ext trainwatch_lab`` adds to one kernel."""

    def __init__(self, shell: Any, defaults: Defaults = DEFAULTS) -> None:
        self.shell = shell
        self.defaults = defaults
        self.inline: InlineAlerts | None = attach(shell)
        self.log_lines: CellLogHandler | None = None
        if self.inline is not None:  # our notices under the cell, never as stderr
            self.log_lines = CellLogHandler(self.inline.tracker, self.inline.publish)
            self.log_lines.install()
        self.dashboard: Any = None  # the live TrainWatch
        self.replay_view: Any = None  # the last %trainwatch --since (a Replay)
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
        if self.log_lines is not None:
            self.log_lines.uninstall()
        detach(self.shell)

    # -- live dashboard ---------------------------------------------------------------
    def start(self, opts: Options) -> Any:
        from .dashboard.widget import TrainWatch

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
        self._follow_cells(dash.sampler)
        previous, self.dashboard = self.dashboard, dash
        if previous is not None:
            previous.stop("replaced by a newer %trainwatch")
        self._close_notifier()
        self.notifier = subscribe_notifier(dash.sampler, opts)
        self.options = opts
        self.started_at = time.time()
        dash.start()
        dash.show()
        check_and_show(self.inline, paths, opts.probe, self.defaults)
        return dash

    def replay(self, opts: Options) -> Any:
        """``%trainwatch --since``: the recorded window, read on a helper thread. A read that
        ends within ``replay_wait_s`` without a history is one printed line (where we looked,
        how to record) and no widget; a slower read shows the widget, which fills in. The
        live dashboard, if any, goes on untouched."""
        from .dashboard.replay import Replay

        view = Replay(opts.since, opts.until, defaults=self.defaults)
        if view.wait(self.defaults.replay_wait_s) and view.error is not None:
            print(f"trainwatch: {view.error}")
            view.close()
            return None
        self.replay_view = view
        display(view)
        return view

    def stop(self) -> str:
        dash, self.dashboard = self.dashboard, None
        self._close_notifier()
        if dash is None:
            return NOT_RUNNING
        dash.stop("stopped")
        return f"trainwatch: stopped after {dash.samples} samples"

    def _close_notifier(self) -> None:
        notifier, self.notifier = self.notifier, None
        close_notifier(notifier)

    def status(self) -> str:
        from .dashboard.snapshot import latency_text, mount_text

        dash = self.dashboard
        if dash is None:
            return "\n".join([NOT_RUNNING, *mirror_lines()])
        opts = self.options or Options()
        latest = dash.sampler.latest
        state = "paused" if dash.paused else "live"
        if dash.unseen:  # (notebook/dashboard/widget.py: no view, or no browser, is left)
            state += ", not drawing while nobody sees the dashboard"
        lines = [
            f"trainwatch: {state} since "
            f"{time.strftime('%H:%M:%S', time.localtime(self.started_at or 0))}, every "
            f"{dash.sampler.interval:g} s, window {opts.window:g} s, {dash.samples} samples"
        ]
        paths = dash.paths()
        lines[0] += f", watching {scope_text(len(paths))}"
        lines.append(f"  sampler: {sampler_text(dash.sampler)}")
        for p in paths:
            state = latest.paths.get(p) if latest else None
            found = self.discovered.get(p)
            origin = f" (found: {found.where})" if found else ""
            detail = f"{mount_text(state)}; {latency_text(state)}" if state else "no sample yet"
            lines.append(f"  {p}{origin}: {detail}")
        if not paths:
            lines.append("  no watched paths")
        gpu_line = latest is not None and "gpus" in latest.notes
        if gpu_line:
            lines.append(f"  GPU: {latest.notes['gpus']}")  # type: ignore[union-attr]
        lines.extend(warning_lines(latest.warnings if latest else [], len(paths), gpu_line))
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
        check_and_show(self.inline, [f.path for f in new], probe, self.defaults)

    # -- %%trainwatch -----------------------------------------------------------------
    def run_cell_watched(self, opts: Options, body: Body) -> Any:
        from .cell.magic import CellWatch

        paths = [normalise(p) for p in opts.all_paths]
        sampler, owned = self._cell_sampler(opts, paths)
        notifier = subscribe_notifier(sampler, opts)
        shared = self.dashboard.paths() if not owned else []
        watched = list(dict.fromkeys(paths + list(self.discovered) + shared))
        watch = CellWatch(sampler, watched, opts.gpus, self.defaults)
        handle = display(watch.strip, display_id=True)
        check_and_show(self.inline, paths, opts.probe, self.defaults)
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
            close_notifier(notifier)
            if handle is not None:
                handle.update(summary)
            else:
                display(summary)
            if self.inline is not None:  # the summary lists them now, each opening to its fix
                self.inline.withdraw(w.alert.key for w in summary.warnings)
            watch.close()

    def _cell_sampler(self, opts: Options, paths: list[str]) -> tuple[Any, bool]:
        """The sampler a ``%%trainwatch`` cell records from, and whether the cell owns it:
        the live dashboard's (the cell's paths added to it), else a new one of its own."""
        from .dashboard.widget import new_sampler

        dash = self.dashboard
        if dash is not None and not dash.stopped:
            for p in paths:
                dash.add_path(p)
            return dash.sampler, False
        sampler = new_sampler(
            paths + list(self.discovered),
            interval=opts.interval,
            probe=opts.probe,
            gpu=opts.gpu,
            window_s=opts.window,
            defaults=self.defaults,
        )
        if self.inline is not None:
            sampler.subscribe(self.inline.on_sample)
        self._follow_cells(sampler)
        return sampler, True

    def _follow_cells(self, sampler: Any) -> None:
        """The kernel's process is judged over the running cell, not the idle time before
        it (io-bound's window): its process source learns when the cell began."""
        source = sampler.find_source("process")
        if self.inline is not None and source is not None and hasattr(source, "busy_since"):
            source.busy_since = self.inline.tracker.started_at
