"""The panel in a real JupyterLab and a real Chromium: live while the kernel is busy, the
shared-mount warning for an sshfs path added in the panel, screenshots in both themes, and
what the stream costs (messages per second, bytes per message)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.support.env import need
from tests.support.lab import (
    REPO_ROOT,
    artifact_path,
    chromium_page,
    jupyter_lab,
    open_notebook,
    wait_cell_done,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.root]

LABEXTENSION = REPO_ROOT / "trainwatch_lab" / "labextension"
SERVER_CONFIG = REPO_ROOT / "trainwatch_lab" / "server" / "etc" / "trainwatch_lab.json"
BUSY_S = 20
PANEL = "#trainwatch-lab-panel"
STATUS = ".jp-TrainWatch-status"


def lab_setup(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """Serve the freshly built labextension and enable the server extension through the very
    config file the wheel ships (also when the wheel is not installed)."""
    need((LABEXTENSION / "package.json").exists(), "needs js/ built (jlpm build:prod)")
    extensions = tmp_path / "labextensions"
    extensions.mkdir()
    (extensions / "trainwatch-lab").symlink_to(LABEXTENSION, target_is_directory=True)
    config = tmp_path / "jupyter-config" / "jupyter_server_config.d"
    config.mkdir(parents=True)
    shutil.copy(SERVER_CONFIG, config / "trainwatch_lab.json")
    args = [f"--LabApp.extra_labextensions_path={extensions}"]
    # the checkout's package, whether or not it is pip-installed
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return args, {"JUPYTER_CONFIG_PATH": str(config.parent), "PYTHONPATH": pythonpath}


def start_cell(page, index: int) -> None:
    """Run a cell without waiting for it (returning the command's promise would make
    Playwright wait for the whole execution)."""
    page.evaluate(
        """(i) => {
            const app = window.jupyterapp;
            const nb = app.shell.currentWidget;
            nb.content.activeCellIndex = i;
            nb.content.deselectAll();
            void app.commands.execute('notebook:run-cell');
            return true;
        }""",
        index,
    )


def panel_counters(page) -> dict:
    return page.evaluate(
        f"() => {{ const d = document.querySelector('{PANEL}').dataset;"
        " return {samples: Number(d.samples || 0), renders: Number(d.renders || 0)}; }"
    )


def stream_stats(page) -> dict:
    return page.evaluate(
        "() => ({...window.trainwatchLab.stream.stats, now: Date.now(),"
        " samples: Number(document.querySelector('#trainwatch-lab-panel').dataset.samples||0),"
        " diskPoints: Number(document.querySelectorAll('#trainwatch-lab-panel"
        " .jp-TrainWatch-chart')[2].dataset.points || 0)})"
    )


def test_panel_lives_through_a_busy_kernel_and_flags_an_sshfs_path(tmp_path, sshfs_mount):
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "busy.ipynb", [f"import time\ntime.sleep({BUSY_S})\n'done'"])
    args, env = lab_setup(tmp_path)
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page() as page:
        open_notebook(page, lab, "busy.ipynb")

        # the status item fills from the server's stream, then opens the panel
        status = page.locator(STATUS)
        status.wait_for(timeout=60_000)
        page.wait_for_function(
            "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0",
            timeout=60_000,
        )
        status.click()
        panel = page.locator(PANEL)
        panel.wait_for(state="visible", timeout=30_000)
        page.wait_for_function(
            f"() => Number(document.querySelector('{PANEL}').dataset.samples || 0) >= 3",
            timeout=60_000,
        )

        # keep the kernel busy: the charts must keep moving (the data comes from the server)
        start_cell(page, 0)
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.sessionContext.session"
            ".kernel.status === 'busy'",
            timeout=30_000,
        )
        before = stream_stats(page)
        readings = []
        for i in range(4):
            page.wait_for_timeout(3_000)
            readings.append(stream_stats(page))
            if i == 1:  # mid-cell: the kernel is busy, the panel is live
                page.screenshot(path=str(artifact_path("panel-light.png")))
        kernel_state = page.locator(f"{PANEL} .jp-TrainWatch-kernelHead").first.inner_text()
        after = readings[-1]
        wait_cell_done(page, 0, timeout_ms=(BUSY_S + 60) * 1000)

        counts = [before["samples"]] + [r["samples"] for r in readings]
        assert all(b > a for a, b in itertools.pairwise(counts)), counts
        points = [before["diskPoints"]] + [r["diskPoints"] for r in readings]
        assert points[-1] > points[0], points
        assert "busy" in kernel_state  # the panel saw the kernel busy while it kept updating

        seconds = (after["now"] - before["now"]) / 1000
        messages = after["messages"] - before["messages"]
        metrics = {
            "messages_per_s": round(messages / seconds, 3),
            "bytes_per_message": round((after["bytes"] - before["bytes"]) / max(1, messages)),
            "window_s": round(seconds, 1),
            "samples_during_busy_cell": counts[-1] - counts[0],
        }
        artifact_path("browser-metrics.json").write_text(json.dumps(metrics, indent=1))
        print("trainwatch stream while the kernel was busy:", metrics)
        assert messages > 0

        # add the sshfs path in the panel: the shared-mount warning must show, naming it
        target = str(sshfs_mount.path)
        page.fill(f"{PANEL} .jp-TrainWatch-pathInput", target)
        page.click(f"{PANEL} .jp-TrainWatch-addButton")
        page.locator(f"{PANEL} .jp-TrainWatch-pathRow[data-path='{target}']").wait_for(
            timeout=30_000
        )
        warning = page.locator(f"{PANEL} .jp-TrainWatch-warning[data-code='shared-mount']")
        warning.first.wait_for(timeout=60_000)
        assert target in warning.first.inner_text() or target.startswith(
            warning.first.get_attribute("data-subject") or "\0"
        )
        page.wait_for_function(
            f"() => document.querySelector('{STATUS}').textContent.includes('⚠')",
            timeout=30_000,
        )
        warning.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifact_path("panel-light-shared-mount.png")))

        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme',"
            " {theme: 'JupyterLab Dark'})"
        )
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        time.sleep(1.5)  # a couple of ticks so the charts redraw in the dark palette
        warning.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifact_path("panel-dark.png")))
        stroke = page.evaluate(
            "() => getComputedStyle(document.querySelector('.jp-TrainWatch-panel'))"
            ".getPropertyValue('--jp-layout-color1')"
        )
        assert stroke.strip()  # the panel reads the theme's variables


def test_panel_pauses_while_hidden_and_reconnects_after_a_server_restart(tmp_path):
    """Hidden, the panel keeps its data but does not draw. The stream drops when Jupyter
    stops; the panel says so and comes back by itself (with backoff) once a server answers on
    the same address again."""
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    live = "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0"
    with chromium_page() as page:
        with jupyter_lab(root, extra_args=args, env=env) as lab:
            page.goto(lab.url("lab"))
            page.wait_for_function(live, timeout=90_000)
            port, token = urlparse(lab.base).port, lab.token

            # the palette command opens the panel; hidden, it keeps counting but stops drawing
            page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
            page.locator(PANEL).wait_for(state="visible", timeout=30_000)
            page.evaluate("() => window.jupyterapp.shell.collapseRight()")
            page.locator(PANEL).wait_for(state="hidden", timeout=30_000)
            hidden = panel_counters(page)
            page.wait_for_timeout(3_000)
            still_hidden = panel_counters(page)
            assert still_hidden["samples"] > hidden["samples"]  # data keeps flowing in
            assert still_hidden["renders"] == hidden["renders"]  # but nothing is drawn
            page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
            page.wait_for_function(
                f"(n) => Number(document.querySelector('{PANEL}').dataset.renders) > n",
                arg=hidden["renders"],
                timeout=30_000,
            )
        page.wait_for_function(
            "() => window.trainwatchLab.stream.state !== 'open'"
            f" && document.querySelector('{STATUS}').textContent.includes('offline')",
            timeout=30_000,
        )
        before = page.evaluate("() => window.trainwatchLab.stream.stats")
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
            "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}", *args,
        ]  # fmt: skip
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(tmp_path / "restarted-lab.log", "wb") as log:
            proc = subprocess.Popen(
                cmd, cwd=root, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            try:
                page.wait_for_function(
                    "(n) => window.trainwatchLab.stream.state === 'open'"
                    " && window.trainwatchLab.stream.stats.messages > n",
                    arg=before["messages"],
                    timeout=120_000,
                )
                page.wait_for_function(
                    f"() => !document.querySelector('{STATUS}').textContent.includes('offline')",
                    timeout=30_000,
                )
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
        after = page.evaluate("() => window.trainwatchLab.stream.stats")
        assert before["reconnects"] >= 1 and after["messages"] > before["messages"]
