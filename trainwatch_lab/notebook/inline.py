"""Warnings under the cell the user is looking at: the one that is running right now.

The sampler runs on its own thread, and where a thread's ``display()`` lands changed across
ipykernel versions: 6 sends it to the latest cell (the global parent header); 7.0 sent it to
the cell that *started* the thread; 7.1+ goes back to the latest cell unless the thread set a
parent. We never rely on either. The ``pre_run_cell`` hook runs on the main thread inside the
executing cell, where ``shell.get_parent()`` is that cell's request on every version; we keep
that header, and the sampler thread publishes ``display_data`` with it *explicitly*. The
message then lands under that cell whatever the kernel's thread routing does.

JupyterLab drops output for a cell that has finished, so warnings are only sent while a cell is
running; the dashboard shows every warning anyway (widget state, not cell output).

A warning about a directory that a notebook variable names (discover.py: ``writer.log_dir``)
carries its fix as code for that object, with a copy button: ``writer =
SummaryWriter(local_mirror("/mnt/share/runs/exp1"))``. Framework callbacks running inside a
cell report through here too (fix.report), so their warnings land under that cell.
"""

from __future__ import annotations

import contextlib
import html
import logging
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..core.model import Alert, Sample
from ..fix import report as fix_report
from .discover import Found, discover, fix_code
from .warnings_html import ALERT_MIME, alert_html, alert_text, alerts_bundle

log = logging.getLogger(__name__)

# (bundle, parent, display id, update) -> delivered. ``update``: replace what was shown
# under that display id (an empty bundle: nothing left to show)
Publish = Callable[[dict[str, Any], Any, str | None, bool], bool]


def _cell_key(parent: Any) -> Any:
    """The cell request a parent header stands for (its msg_id), whatever shape it has."""
    if isinstance(parent, dict):
        header = parent.get("header") if isinstance(parent.get("header"), dict) else parent
        return header.get("msg_id") or id(parent)
    return id(parent)


def current_parent(shell: Any) -> Any:
    """The request message of the cell executing on this thread (main thread: the cell).

    ipykernel >= 6.? has ``shell.get_parent()``; older ones keep ``shell.parent_header``;
    a plain IPython shell has neither (None).
    """
    getter = getattr(shell, "get_parent", None)
    if callable(getter):
        try:
            parent = getter()
        except Exception:
            parent = None
        if parent:
            return parent
    parent = getattr(shell, "parent_header", None)
    if parent:
        return parent
    kernel = getattr(shell, "kernel", None)
    getter = getattr(kernel, "get_parent", None)
    if callable(getter):
        try:
            return getter("shell") or None
        except Exception:
            return None
    return None


class CellTracker:
    """Knows whether a cell is executing and which one (its parent header).

    ``pre``/``post`` are IPython's ``pre_run_cell``/``post_run_cell`` callbacks; nested
    ``run_cell`` calls (``%%trainwatch`` runs its body that way) count as the same cell.
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._lock = threading.Lock()
        self._depth = 0
        self._parent: Any = None
        self._started: float | None = None  # when the running top-level cell began
        self.generation = 0  # bumps on each new top-level cell

    def pre(self, info: Any = None) -> None:
        parent = current_parent(self.shell)
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._parent = parent
                self._started = time.time()
                self.generation += 1

    def post(self, result: Any = None) -> None:
        with self._lock:
            self._depth = max(0, self._depth - 1)
            if self._depth == 0:
                self._parent = None

    def started_at(self) -> float | None:
        """When the running cell began (epoch s), None while the kernel is idle: the time
        io-bound judges (ProcessIOSource.busy_since)."""
        with self._lock:
            return self._started if self._depth > 0 else None

    @property
    def running(self) -> bool:
        with self._lock:
            return self._depth > 0

    @property
    def parent(self) -> Any:
        """The running cell's parent header, or None when the kernel is idle."""
        with self._lock:
            return self._parent if self._depth > 0 else None

    def register(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre)
        self.shell.events.register("post_run_cell", self.post)

    def unregister(self) -> None:
        for event, fn in (("pre_run_cell", self.pre), ("post_run_cell", self.post)):
            with contextlib.suppress(ValueError):
                self.shell.events.unregister(event, fn)


COPY_SCRIPT = (
    "navigator.clipboard.writeText(this.parentElement.querySelector('pre').innerText);"
    "this.textContent='Copied'"
)


def fix_code_html(code: str) -> str:
    """The fix as a code block with a copy button (inline styles: shown outside the widget)."""
    return (
        f'<div class="tw-fix-code" data-fix-code="{html.escape(code, quote=True)}" '
        'style="margin:0 0 6px 12px">'
        f'<button type="button" class="tw-copy" title="Copy the fix" onclick="{COPY_SCRIPT}" '
        'style="float:right;font-size:var(--jp-ui-font-size0)">Copy</button>'
        '<pre style="margin:0;padding:4px 8px;background:var(--jp-cell-editor-background);'
        f'font-family:var(--jp-code-font-family)">{html.escape(code)}</pre></div>'
    )


def bundle_with_fixes(alerts: list[Alert], codes: list[str | None]) -> dict[str, Any]:
    """``alerts_bundle`` with each alert's fix as code, where there is one: after its text,
    after its block in the HTML, and as ``fix_code`` in the JSON copy."""
    bundle = alerts_bundle(alerts)
    if not any(codes):
        return bundle
    texts, blocks = [], []
    for a, code in zip(alerts, codes, strict=True):
        text, block = f"trainwatch: {alert_text(a)}", alert_html(a)
        if code:
            text += "\n  Fix as code:\n" + "\n".join(f"    {line}" for line in code.splitlines())
            block += fix_code_html(code)
        texts.append(text)
        blocks.append(block)
    bundle["text/plain"] = "\n".join(texts)
    bundle["text/html"] = f'<div class="tw-root tw-inline-alerts">{"".join(blocks)}</div>'
    for item, code in zip(bundle[ALERT_MIME]["alerts"], codes, strict=True):
        item["fix_code"] = code
    return bundle


def kernel_publisher(shell: Any) -> Publish | None:
    """Send display_data with an explicit parent over the kernel's IOPub (thread-safe:
    ipykernel's IOPub socket hands every send to its own IO thread). None outside a kernel."""
    pub = getattr(shell, "display_pub", None)
    session = getattr(pub, "session", None)
    socket = getattr(pub, "pub_socket", None)
    if session is None or socket is None:
        return None
    topic = getattr(pub, "topic", b"display_data")

    def publish(
        bundle: dict[str, Any], parent: Any, display_id: str | None = None, update: bool = False
    ) -> bool:
        if not parent or (update and not display_id):
            return False
        transient = {"display_id": display_id} if display_id else {}
        content = {"data": bundle, "metadata": {}, "transient": transient}
        kind = "update_display_data" if update else "display_data"
        session.send(socket, kind, content, parent=parent, ident=topic)
        return True

    return publish


def stream_publisher(stream: Any = None) -> Publish:
    """Terminal IPython (no kernel): print the text form; the terminal is the running cell."""

    def publish(
        bundle: dict[str, Any], parent: Any, display_id: str | None = None, update: bool = False
    ) -> bool:
        out = stream or sys.__stdout__
        if out is None or update:  # printed is printed
            return False
        out.write(bundle["text/plain"] + "\n")
        out.flush()
        return True

    return publish


class Shown(NamedTuple):
    """One display under a cell: its id, its warnings and the fix code each carried."""

    display_id: str
    alerts: list[Alert]
    codes: list[str | None]


class InlineAlerts:
    """Shows each warning condition once, under the cell running when it starts.

    A condition is ``(code, subject)``. It re-arms only after it has been gone for
    ``rearm_after_s`` (so a flapping threshold does not spam the notebook). ``info`` warnings
    stay in the dashboard.
    """

    def __init__(
        self,
        tracker: CellTracker,
        publish: Publish | None,
        rearm_after_s: float = 60.0,
        min_severity: Iterable[str] = ("warning", "critical"),
    ) -> None:
        self.tracker = tracker
        self.publish = publish
        self.rearm_after_s = rearm_after_s
        self.severities = set(min_severity)
        self._lock = threading.Lock()
        self._showing = threading.Lock()  # one display at a time: its fix codes are its own
        self._last_seen: dict[tuple[str, str], float] = {}
        self.shown: list[Alert] = []  # every alert published inline, in order
        self.found: dict[str, Found] = {}  # directory -> the variable that names it
        # cell -> the displays shown under it: a summary can take their place, and a fix
        # code shown under a cell is not shown there again
        self._under: dict[Any, list[Shown]] = {}
        self._ids: dict[str, int] = {}  # variable -> id(value) after the last cell

    # -- what the notebook's variables name (main thread, after each cell) ------------
    def learn(self, result: Any = None) -> None:
        """``post_run_cell``: look at the variables the cell (re)assigned, as the magic does,
        so that a warning can name the object and carry its fix as code."""
        try:
            ns = self.tracker.shell.user_ns
            ids = {n: id(v) for n, v in list(ns.items()) if not n.startswith("_")}
            changed = [n for n, i in ids.items() if self._ids.get(n) != i]
            gone = set(self._ids) - set(ids)  # ``del writer``
            self._ids = ids
            found = discover(ns, names=changed)
        except Exception:  # never break the user's cell
            return
        with self._lock:
            # what a reassigned variable named before is no longer its fix: a writer moved
            # onto local_mirror(share) must not be offered local_mirror for the share again
            stale = gone.union(changed)
            self.found = {p: f for p, f in self.found.items() if f.root not in stale}
            for f in found:
                self.found[f.path] = f

    def fix_codes(self, alerts: list[Alert], parent: Any = None) -> list[str | None]:
        """Each alert's fix as code, once per cell: the same code for two warnings of one
        cause (shared-mount and slow-mount on a share, which often come a tick apart) goes
        with the first only, and not again under ``parent``'s cell once shown there."""
        with self._lock:
            found = [self.found.get(a.subject) for a in alerts]
            shown = {c for *_, codes in self._under.get(_cell_key(parent), ()) for c in codes}
        codes: list[str | None] = []
        for a, f in zip(alerts, found, strict=True):
            code = fix_code(f, a.code) if f else None
            codes.append(None if code in codes or code in shown else code)
        return codes

    def bundle(self, alerts: list[Alert], parent: Any = None) -> dict[str, Any]:
        return bundle_with_fixes(alerts, self.fix_codes(alerts, parent))

    def report(self, alerts: list[Alert]) -> bool:
        """fix.report's reporter (framework callbacks, any thread): new conditions go under
        the running cell; False when no cell runs (the caller logs them instead)."""
        fresh = self.new_conditions(alerts, time.time())
        return self.show(fresh) if fresh else True

    def mark_shown(self, alerts: Iterable[Alert], now: float) -> None:
        """Warnings the caller already showed itself (the magic's immediate check)."""
        with self._lock:
            for a in alerts:
                self._last_seen[a.key] = now

    def new_conditions(self, alerts: Iterable[Alert], now: float) -> list[Alert]:
        """The warnings whose condition was not active a moment ago; remembers all of them."""
        fresh: list[Alert] = []
        with self._lock:
            for a in alerts:
                if a.severity not in self.severities:
                    continue
                seen = self._last_seen.get(a.key)
                if seen is None or now - seen > self.rearm_after_s:
                    fresh.append(a)
                self._last_seen[a.key] = now
        return fresh

    def display_here(self, alerts: list[Alert], now: float) -> None:
        """Show warnings from the main thread inside the running cell (a plain ``display``
        lands in that cell on every ipykernel) and count their conditions as shown."""
        if not alerts:
            return
        from IPython.display import display

        display_id = uuid.uuid4().hex
        parent = self.tracker.parent
        with self._showing:
            codes = self.fix_codes(alerts, parent)
            display(bundle_with_fixes(alerts, codes), raw=True, display_id=display_id)
            self.mark_shown(alerts, now)
            self._remember(parent, Shown(display_id, list(alerts), codes))

    def _remember(self, parent: Any, shown: Shown) -> None:
        with self._lock:
            self.shown.extend(shown.alerts)
            self._under.setdefault(_cell_key(parent), []).append(shown)
            if len(self._under) > 64:  # cells long gone: bounded
                self._under.pop(next(iter(self._under)))

    def withdraw(self, covered: Iterable[tuple[str, str]]) -> int:
        """Take back the warnings shown under the running cell whose conditions (``covered``:
        (code, subject) keys) a summary now lists, each of its lines opening to the same
        sentence and fix: one fact, one entry under the cell. A display that also held a
        warning the summary does not list keeps that one. Returns the displays changed."""
        parent = self.tracker.parent
        if parent is None or self.publish is None:
            return 0
        keys = set(covered)
        with self._lock:
            under = self._under.pop(_cell_key(parent), [])
        changed = 0
        for display_id, alerts, codes in under:
            kept = [i for i, a in enumerate(alerts) if a.key not in keys]
            if len(kept) == len(alerts):
                continue
            left = [alerts[i] for i in kept]
            bundle = bundle_with_fixes(left, [codes[i] for i in kept]) if left else {}
            try:
                done = self.publish(bundle, parent, display_id, True)
            except Exception:
                log.debug("trainwatch: could not take back a warning", exc_info=True)
                done = False
            changed += bool(done)
        return changed

    def on_sample(self, sample: Sample) -> None:
        """Sampler-thread subscriber."""
        fresh = self.new_conditions(sample.warnings, sample.t)
        if fresh:
            self.show(fresh)

    def show(self, alerts: list[Alert], parent: Any = None) -> bool:
        """Publish under ``parent`` (default: the running cell); False when nobody can see it
        (no cell running: the dashboard still lists the warning)."""
        if parent is None:
            if not self.tracker.running:
                return False
            parent = self.tracker.parent
        if self.publish is None or not alerts:
            return False
        display_id = uuid.uuid4().hex
        with self._showing:
            codes = self.fix_codes(alerts, parent)
            bundle = bundle_with_fixes(alerts, codes)
            try:
                delivered = self.publish(bundle, parent, display_id, False)
            except Exception:
                log.exception("trainwatch: could not show %s", "; ".join(map(alert_text, alerts)))
                return False
            if delivered:
                self._remember(parent, Shown(display_id, list(alerts), codes))
        return delivered


_ATTACHED: weakref.WeakKeyDictionary[Any, InlineAlerts] = weakref.WeakKeyDictionary()


def attach(shell: Any = None) -> InlineAlerts | None:
    """The shell's one InlineAlerts (created on first use; None outside IPython).

    Called from inside a cell (``%load_ext``, ``%trainwatch``, ``TrainWatch()``): that cell's
    ``pre_run_cell`` has already fired, so we count it as running now; its ``post_run_cell``
    (our hook is registered by then) ends it.
    """
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return None
    existing = _ATTACHED.get(shell)
    if existing is not None:
        return existing
    tracker = CellTracker(shell)
    tracker.register()
    tracker.pre()
    alerts = InlineAlerts(tracker, kernel_publisher(shell) or stream_publisher())
    shell.events.register("post_run_cell", alerts.learn)
    fix_report.add_reporter(alerts.report)
    _ATTACHED[shell] = alerts
    return alerts


def detach(shell: Any) -> None:
    alerts = _ATTACHED.pop(shell, None)
    if alerts is not None:
        alerts.tracker.unregister()
        fix_report.remove_reporter(alerts.report)
        with contextlib.suppress(ValueError):
            shell.events.unregister("post_run_cell", alerts.learn)
