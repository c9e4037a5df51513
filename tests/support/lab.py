"""Start a real JupyterLab and drive it with Debian's Chromium through Playwright.

Shared by the browser tests (tests/notebook/test_browser.py, tests/server/...). Everything is
real: a ``jupyter lab`` subprocess on a free port with its own token, settings and workspace
directories in a temp dir, and /usr/bin/chromium. Missing prerequisites skip on a laptop and
fail under CI (tests.support.env.need).

    with jupyter_lab(tmp_path) as lab, chromium_page() as page:
        page.goto(lab.url("lab/tree/demo.ipynb"))
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .env import need

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / ".test-artifacts"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A running JupyterLab: where it listens, its token, its root dir and its log file."""

    base: str  # http://127.0.0.1:PORT/
    token: str
    root_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes]

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET", body: Any = None, timeout: float = 10) -> Any:
        """Call the server's REST API with the token; returns parsed JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.base}{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode()
        return json.loads(text) if text else None

    def only_kernel_connection_file(self) -> Path:
        """The connection file of this server's one kernel (its runtime dir sits beside
        the log), for a client that is no browser (tests/support/kernel_client.py)."""
        (kernel,) = self.api("api/kernels")
        return self.log_path.parent / "runtime" / f"kernel-{kernel['id']}.json"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@contextlib.contextmanager
def jupyter_lab(
    root_dir: Path,
    *,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    startup_timeout: float = 120.0,
) -> Iterator[LabServer]:
    """Run ``jupyter lab`` serving ``root_dir`` until the block ends (then stop it for sure)."""
    need(shutil.which("jupyter") is not None, "needs `jupyter` on PATH")
    root_dir = Path(root_dir)
    state = root_dir.parent / f".lab-state-{uuid.uuid4().hex[:8]}"
    settings = state / "settings"
    apputils = settings / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    # no news popup, no update check: toasts would cover what the test clicks
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    (state / "workspaces").mkdir()
    port = free_port()
    token = uuid.uuid4().hex
    log_path = state / "jupyter-lab.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.open_browser=False",
        "--LabApp.expose_app_in_browser=True",
        # other tests' scripts would join the watched paths; a test that wants discovery
        # passes --TrainWatch.watch_processes=True (traitlets refuses a flag given twice)
        *(
            []
            if any("watch_processes" in a for a in extra_args)
            else ["--TrainWatch.watch_processes=False"]
        ),
        # the recording would hold the sampler from the start (issue 27); a test that
        # wants it passes --TrainWatch.record=True
        *(
            []
            if any("TrainWatch.record" in a for a in extra_args)
            else ["--TrainWatch.record=False"]
        ),
        *extra_args,
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    full_env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        cmd,
        cwd=root_dir,
        env=full_env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its kernels die with it (we signal the group)
    )
    lab = LabServer(f"http://127.0.0.1:{port}/", token, root_dir, log_path, proc)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{lab.log()}")
            try:
                lab.api("api/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter lab did not answer:\n{lab.log()}") from None
                time.sleep(0.5)
        yield lab
    finally:
        _stop(proc)
        log_file.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    # kernels started by the server share its process group; make sure none survive
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def chromium_page(viewport: tuple[int, int] = (1400, 1000)) -> Iterator[Any]:
    """A Playwright page in Debian's Chromium (headless)."""
    need(os.path.exists(CHROMIUM), f"needs Debian chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - depends on the environment
        need(False, "needs the `playwright` Python package")
        raise
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
            page = context.new_page()
            yield page
        finally:
            browser.close()


# Chromium rejecting an SVG attribute (a chart drawn from data it cannot place), or anything
# thrown in bqplot's own code: what our charts send is the cause of both, so a test fails on
# any of them (no allow-list: none seen that was not ours)
SVG_ERROR = re.compile(r"<\w+> attribute [\w-]+:")


def console_recorder(page: Any) -> list[str]:
    """The page's console errors from now on, each with the script it came from."""
    errors: list[str] = []

    def keep(m: Any) -> None:
        if m.type == "error":
            errors.append(f"{m.text} @ {(m.location or {}).get('url', '')}")

    page.on("console", keep)
    return errors


def chart_errors(console: Sequence[str], name: str) -> list[str]:
    """The errors of ``console_recorder`` that come from bqplot (see SVG_ERROR); all of them
    are kept in the artifact ``name`` for a look."""
    artifact_path(name).write_text("\n".join(console))
    return [m for m in console if SVG_ERROR.search(m) or "/bqplot/" in m]


def artifact_path(name: str) -> Path:
    """Where a test keeps a screenshot or log (repo-root ``.test-artifacts/``, gitignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def write_notebook(path: Path, cells: Sequence[str]) -> Path:
    """A python3 notebook whose code cells hold ``cells`` (so the test never types code)."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": uuid.uuid4().hex[:8],
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for source in cells
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


def open_notebook(page: Any, lab: LabServer, name: str, timeout_ms: int = 120_000) -> None:
    """Open ``name`` (relative to the lab root) and wait until its kernel is idle."""
    page.goto(lab.url(f"lab/tree/{name}?reset"))  # reset: only this notebook open
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
    wait_kernel_idle(page, timeout_ms)


def wait_kernel_idle(page: Any, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(
        """() => {
            const app = window.jupyterapp;
            const w = app && app.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return !!k && k.status === 'idle';
        }""",
        timeout=timeout_ms,
    )


def run_cell(page: Any, index: int, wait: bool = True, timeout_ms: int = 120_000) -> Any:
    """Select cell ``index`` of the current notebook and run it (Shift+Enter does the same).

    Uses JupyterLab's own command, so the browser runs it exactly as a click would; returns
    the cell's DOM element. With ``wait`` it waits until the cell has an execution count.
    """
    page.evaluate(
        """(i) => {
            const app = window.jupyterapp;
            const panel = app.shell.currentWidget;
            panel.content.activeCellIndex = i;
            panel.content.deselectAll();
            app.commands.execute('notebook:run-cell');  // not awaited: wait=False returns now
            return true;
        }""",
        index,
    )
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    if wait:
        wait_cell_done(page, index, timeout_ms)
    return cell


def wait_cell_done(page: Any, index: int, timeout_ms: int = 120_000) -> None:
    """Wait until cell ``index`` finished: it has an execution count and the kernel is idle."""
    page.wait_for_function(
        """(i) => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cell = panel.content.widgets[i];
            const n = cell.model.executionCount;
            const k = panel.sessionContext.session.kernel;
            return n !== null && n !== undefined && k.status === 'idle';
        }""",
        arg=index,
        timeout=timeout_ms,
    )


def set_theme(page: Any, theme: str = "JupyterLab Dark") -> None:
    """Switch JupyterLab's theme ("JupyterLab Light" / "JupyterLab Dark") and wait for it."""
    page.evaluate(
        "(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme
    )
    light = "true" if "Light" in theme else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached", timeout=30_000)
    # JupyterLab shows its splash (a dimmed page, the logo) while the theme loads: a
    # screenshot taken before it leaves is of the splash
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)
