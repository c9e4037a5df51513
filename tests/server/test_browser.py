"""The panel in a real JupyterLab and a real Chromium: live while the kernel is busy, the
shared-mount warning for an sshfs path added in the panel, the headline's verdict line at its
top (the status bar's words from the same headline), info notes as a quiet line, warnings
folded until opened, legends and tick labels where they belong, contrast in both themes, the
live/paused/stale/stopped states, screenshots in both themes, and what the stream costs
(messages per second, bytes per message)."""

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
    set_theme,
    wait_cell_done,
    write_notebook,
)
from trainwatch_lab.core.paths.names import short_path
from trainwatch_lab.fix.mirror.mirror import local_mirror

pytestmark = [pytest.mark.browser, pytest.mark.root]

LABEXTENSION = REPO_ROOT / "trainwatch_lab" / "labextension"
SERVER_CONFIG = REPO_ROOT / "trainwatch_lab" / "server" / "etc" / "trainwatch_lab.json"
BUSY_S = 20
PANEL = "#trainwatch-lab-panel"
STATUS = ".jp-TrainWatch-status"
VERDICT = f"{PANEL} .jp-TrainWatch-verdict"
SCREENSHOTS = REPO_ROOT / ".github" / "screenshots"

# WCAG contrast of an element's text against what is behind it, from computed styles: the
# colour (rgb(), rgba() or color(srgb ...) as color-mix() computes) blended over the first
# opaque background up the tree
CONTRAST_JS = """(selector) => {
    const parse = (text) => {
        const nums = (text.match(/[\\d.]+/g) || []).map(Number);
        if (text.startsWith('color(srgb')) {
            return [nums[0] * 255, nums[1] * 255, nums[2] * 255, nums.length > 3 ? nums[3] : 1];
        }
        return [nums[0], nums[1], nums[2], nums.length > 3 ? nums[3] : 1];
    };
    const over = (top, bottom) => [0, 1, 2].map(
        i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
    const lum = (c) => {
        const [r, g, b] = c.slice(0, 3).map(v => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const node = document.querySelector(selector);
    const layers = [];
    for (let n = node; n; n = n.parentElement) {
        const bg = parse(getComputedStyle(n).backgroundColor);
        if (bg[3] > 0) {
            layers.push(bg);
            if (bg[3] >= 1) break;
        }
    }
    let back = [255, 255, 255, 1];
    for (const layer of layers.reverse()) back = over(layer, back);
    const fore = over(parse(getComputedStyle(node).color), back);
    const [a, b] = [lum(fore), lum(back)].sort((x, y) => y - x);
    return {ratio: (a + 0.05) / (b + 0.05), color: getComputedStyle(node).color,
            background: back};
}"""

# every chart on screen (not hidden, not folded): its figure, plot area, legend and tick
# labels (page coordinates)
CHART_GEOMETRY_JS = """() => window.trainwatchLab.panel.charts
    .filter(c => c.isVisible && c.node.offsetParent !== null
        && !c.node.querySelector('.jp-TrainWatch-plot').hidden)
    .map(c => {
        const box = (n) => { const r = n.getBoundingClientRect();
            return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
        return {
            title: c.node.querySelector('.jp-TrainWatch-chartTitle').textContent,
            figure: box(c.node.querySelector('.uplot')),
            widget: box(c.node),
            plot: box(c.node.querySelector('.u-over')),
            legend: box(c.node.querySelector('.u-legend')),
            labels: c.tickLabels(),
        };
    })"""


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


def open_section(page, section: str) -> None:
    """Open a folded section of the panel (``paths``, ``kernels``...) as a reader would: a
    click on its title."""
    title = page.locator(f"{PANEL} .jp-TrainWatch-section[data-section='{section}']")
    if title.get_attribute("data-open") != "true":
        title.locator(".jp-TrainWatch-sectionToggle").click()
    page.wait_for_function(
        "(s) => document.querySelector(`.jp-TrainWatch-section[data-section='${s}']`)"
        ".dataset.open === 'true'",
        arg=section,
    )


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
        " .jp-TrainWatch-chart')[1].dataset.points || 0)})"
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
        open_section(page, "kernels")
        kernel_state = page.locator(f"{PANEL} .jp-TrainWatch-kernelHead").first.inner_text()
        page.locator(f"{PANEL} [data-section='kernels']").scroll_into_view_if_needed()
        page.screenshot(path=str(artifact_path("panel-kernels-light.png")))
        after = readings[-1]
        wait_cell_done(page, 0, timeout_ms=(BUSY_S + 60) * 1000)

        counts = [before["samples"]] + [r["samples"] for r in readings]
        assert all(b > a for a, b in itertools.pairwise(counts)), counts
        points = [before["diskPoints"]] + [r["diskPoints"] for r in readings]
        assert points[-1] > points[0], points
        assert "busy" in kernel_state  # the panel saw the kernel busy while it kept updating
        assert kernel_state.startswith("busy.ipynb · ")  # named by its notebook

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
        open_section(page, "paths")
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
        # stopped: said in the header, and the controls that need the server are disabled
        assert panel_state(page) == "stopped"
        assert "server unreachable" in page.locator(f"{PANEL} .jp-TrainWatch-state").inner_text()
        for control in ("pause", "addButton", "pathInput"):
            assert page.locator(f"{PANEL} .jp-TrainWatch-{control}").is_disabled(), control
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
                page.wait_for_function(
                    f"() => document.querySelector('{PANEL}').dataset.state === 'live'",
                    timeout=30_000,
                )
                assert page.locator(f"{PANEL} .jp-TrainWatch-addButton").is_enabled()
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


def _overlap(a: dict, b: dict) -> bool:
    across = a["left"] < b["right"] and b["left"] < a["right"]
    return across and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (
        inner["left"] >= outer["left"] - slack
        and inner["right"] <= outer["right"] + slack
        and inner["top"] >= outer["top"] - slack
        and inner["bottom"] <= outer["bottom"] + slack
    )


def check_charts(page, phase: str) -> list[dict]:
    """Legends under the plot area, never over it; tick labels inside the figure, none cut,
    none repeated, none over another."""
    charts = page.evaluate(CHART_GEOMETRY_JS)
    assert charts, "no chart visible"
    for c in charts:
        title = f"{phase}: {c['title']}"
        assert not _overlap(c["legend"], c["plot"]), (title, c["legend"], c["plot"])
        assert c["legend"]["top"] >= c["plot"]["bottom"] - 1, title
        assert _inside(c["legend"], c["widget"]), (title, "legend runs past the panel")
        assert _inside(c["figure"], c["widget"]), (title, "figure wider than the panel")
        labels = c["labels"]
        assert {b["axis"] for b in labels} == {"x", "y"}, (title, labels)
        for b in labels:
            assert _inside(b, c["figure"]), (title, b, c["figure"])
            assert not _overlap(b, c["plot"]), (title, "a tick label over the plot", b)
        for axis in ("x", "y"):
            texts = [b["text"] for b in labels if b["axis"] == axis]
            assert len(texts) == len(set(texts)), (title, axis, texts)  # no repeated label
            boxes = [b for b in labels if b["axis"] == axis]
            assert not any(_overlap(a, b) for a, b in itertools.combinations(boxes, 2)), title
        xs = [b["text"] for b in labels if b["axis"] == "x"]
        assert all(len(x) in (5, 8) and x[2] == ":" for x in xs), xs  # 24-hour HH:MM(:SS)
        assert not any(x.endswith(("am", "pm")) for x in xs)
    return charts


def dom_headline(page) -> dict:
    """The verdict line, its sample's time and the status bar, read in one go."""
    return page.evaluate(
        f"""() => {{
            const v = document.querySelector('{VERDICT}');
            return {{text: v.textContent, t: Number(v.dataset.t), level: v.dataset.level,
                     status: document.querySelector('{STATUS}').textContent,
                     latest: window.trainwatchLab.stream.latest.t}};
        }}"""
    )


def verdict_contrast(page) -> dict[str, float]:
    """Contrast of the verdict line's text at every level (a copy of the line per level, so
    colours that are not up right now are measured too) and of its facts."""
    ratios = {}
    for level in ("ok", "warning", "critical"):
        page.evaluate(
            """([sel, level]) => {
                const v = document.querySelector(sel);
                const probe = v.cloneNode(true);
                probe.id = 'tw-contrast-probe';
                probe.className = v.className.replace(/jp-mod-\\w+/, 'jp-mod-' + level);
                v.after(probe);
            }""",
            [VERDICT, level],
        )
        try:
            measured = page.evaluate(CONTRAST_JS, "#tw-contrast-probe .jp-TrainWatch-verdictWord")
            ratios[level] = measured["ratio"]
        finally:
            page.evaluate("() => document.getElementById('tw-contrast-probe').remove()")
    ratios["facts"] = page.evaluate(CONTRAST_JS, f"{VERDICT} .jp-TrainWatch-facts")["ratio"]
    return ratios


def widen_sidebar(page, width: int = 400) -> None:
    """Drag the handle between the main area and the right sidebar (as a user would) until
    the panel is about ``width`` px wide."""
    handle = page.evaluate(
        """() => [...document.querySelectorAll('#jp-main-split-panel > .lm-SplitPanel-handle')]
            .map(h => h.getBoundingClientRect()).filter(r => r.height > 0)
            .map(r => [r.left + r.width / 2, r.top + r.height / 2]).pop()"""
    )
    now = page.locator(PANEL).bounding_box()["width"]
    page.mouse.move(*handle)
    page.mouse.down()
    page.mouse.move(handle[0] - (width - now), handle[1], steps=8)
    page.mouse.up()
    page.wait_for_timeout(500)


def screenshot_panel(page, name: str, height: int = 1500) -> Path:
    """The whole panel (a tall window, so nothing is scrolled away), into .test-artifacts/."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": height})
    try:
        page.wait_for_timeout(1_200)  # a tick or so: the charts take the new size
        path = artifact_path(name)
        page.locator(PANEL).screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path


def panel_state(page) -> str:
    return page.evaluate(f"() => document.querySelector('{PANEL}').dataset.state")


def test_panel_opens_with_the_headline_and_shows_when_its_data_is_stale(tmp_path, tmpfs_mount):
    """Issue 11 for the panel: the verdict line Python made (the status bar from the same
    headline), the info note once and quietly, a warning folded until opened, one line per
    filesystem, legends and ticks where they belong, contrast in light and dark, and the
    states: paused on request, stale while the server cannot speak, live again after."""
    tmpfs = tmpfs_mount("16m")
    paths = [tmpfs.path / "logs", tmpfs.path / "ckpt"]
    for p in paths:
        p.mkdir()
    (paths[1] / "last.ckpt").write_bytes(b"\0" * (15 * 1024 * 1024))  # disk-almost-full
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    # a log mirror of this process, where the server looks for mirrors (issue 13)
    env["TRAINWATCH_MIRROR_ROOT"] = str(tmp_path / "scratch")
    mirror = local_mirror(tmp_path / "share" / "exp1", every=60, local_root=tmp_path / "scratch")
    (mirror / "events.out.tfevents.1").write_bytes(b"e" * 4096)
    assert mirror.sync(10)
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1400, 900)) as page:
        for p in paths:
            lab.api("trainwatch-lab/api/paths", "POST", {"path": str(p)})
        page.goto(lab.url("lab"))
        page.wait_for_function(
            "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0",
            timeout=90_000,
        )
        page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
        page.locator(PANEL).wait_for(state="visible", timeout=30_000)
        warning = page.locator(f"{PANEL} .jp-TrainWatch-warning[data-code='disk-almost-full']")
        warning.first.wait_for(timeout=60_000)
        page.wait_for_function(
            f"() => document.querySelector('{PANEL}').dataset.state === 'live'", timeout=30_000
        )

        # the verdict line is the snapshot's headline.text, word for word; the status bar
        # its brief (compared on the very same sample)
        for _ in range(30):
            snap = lab.api("trainwatch-lab/api/snapshot")
            page.wait_for_function(
                f"(t) => Number(document.querySelector('{VERDICT}').dataset.t) >= t",
                arg=snap["t"],
                timeout=30_000,
            )
            shown = dom_headline(page)
            if shown["t"] == snap["t"] == shown["latest"]:
                break
        else:
            pytest.fail("the panel never showed the sample the snapshot returned")
        headline = snap["headline"]
        assert shown["text"] == headline["text"]
        assert shown["status"] == headline["brief"]
        assert shown["level"] == headline["level"] != "ok"  # a warning is up
        assert "kB/s" not in shown["status"] or "kB/s" in headline["brief"]  # no words of ours
        # ...at the top: above every section, right under the state line
        tops = page.evaluate(
            f"""() => [...document.querySelectorAll('{PANEL} > .lm-Widget')]
                .filter(n => n.offsetParent !== null)
                .map(n => [n.className, n.getBoundingClientRect().top])"""
        )
        assert "jp-TrainWatch-header" in tops[0][0] and "jp-TrainWatch-verdict" in tops[1][0]

        # an info note (no GPU here) is one quiet line, shown once, never a warning box, and
        # never cut ("no NVIDIA driver on t..."): a long one wraps, every word on screen
        notes = [w for w in snap["warnings"] if w["severity"] == "info"]
        for note in notes:
            quiet = page.locator(f"{PANEL} .jp-TrainWatch-infoNote[data-code='{note['code']}']")
            assert quiet.count() == 1 and quiet.inner_text() == note["message"]
            assert quiet.evaluate(
                "(n) => n.scrollWidth <= n.clientWidth && getComputedStyle(n).textOverflow"
                " !== 'ellipsis'"
            )
            boxed = page.locator(f"{PANEL} .jp-TrainWatch-warning[data-code='{note['code']}']")
            assert boxed.count() == 0
            key = note["message"].split(":")[0]  # "No GPU metrics"
            assert page.locator(PANEL).inner_text().count(key) == 1, key
        if any(n["code"] == "gpu-unavailable" for n in notes):
            assert not page.locator(f"{PANEL} .jp-TrainWatch-chart").first.is_visible()

        # a warning is folded to its first line until opened
        item = warning.first
        fix = item.locator(".jp-TrainWatch-fix")
        assert item.get_attribute("open") is None and not fix.is_visible()
        head = item.locator("summary")
        one_line = head.locator(".jp-TrainWatch-message").evaluate(
            "(n) => getComputedStyle(n).whiteSpace === 'nowrap'"
            " && n.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(n).fontSize)"
        )
        assert one_line
        head.click()
        fix.wait_for(state="visible", timeout=5_000)
        assert fix.inner_text().startswith("Fix: ")
        page.wait_for_timeout(2_500)  # ticks later (re-renders) it stays open
        assert item.get_attribute("open") is not None

        # one line per filesystem: both paths are on the one tmpfs
        space = page.locator(f"{PANEL} .jp-TrainWatch-chart").nth(2)
        legend = space.locator(".u-legend .u-series")
        labels = [legend.nth(i).inner_text() for i in range(legend.count())]
        assert sum(str(tmpfs.path.name) in label for label in labels) == 1, labels

        page.wait_for_timeout(3_000)  # a few points, so the axes have something to say
        space_data = page.evaluate(
            "() => window.trainwatchLab.panel.charts[2]._plot.data.slice(1)"
            ".map(col => col.filter(v => v !== null))"
        )
        tmpfs_line = space_data[[str(tmpfs.path.name) in label for label in labels].index(True)]
        assert len(tmpfs_line) >= 3 and 90 <= tmpfs_line[-1] <= 100, tmpfs_line  # % used
        check_charts(page, "light")
        light = verdict_contrast(page)
        assert min(light.values()) >= 4.5, light
        light_bg = page.evaluate(CONTRAST_JS, f"{VERDICT} .jp-TrainWatch-facts")["background"]
        widen_sidebar(page)  # the rest runs in a wider panel: the charts follow its width
        check_charts(page, "light, wide")
        # the mirror: one line in Python's words (those of %trainwatch status)
        open_section(page, "mirrors")
        line = page.locator(f"{PANEL} .jp-TrainWatch-mirror")
        line.first.wait_for(timeout=30_000)
        assert line.count() == 1 and line.get_attribute("data-local") == mirror.local
        text = line.inner_text()
        assert text.startswith(f"mirror to {short_path(mirror.share, 2)}: in sync (1 file"), text
        assert text.endswith(f"; {mirror.local} -> {mirror.share}"), text
        screenshot_panel(page, "lab-panel.png")

        # paused: the charts hold still while samples keep arriving
        page.click(f"{PANEL} .jp-TrainWatch-pause")
        assert panel_state(page) == "paused"
        assert "paused" in page.locator(f"{PANEL} .jp-TrainWatch-state").inner_text()
        frozen = page.evaluate(
            f"() => [...document.querySelectorAll('{PANEL} .jp-TrainWatch-chart')]"
            ".map(c => c.dataset.points)"
        )
        before = panel_counters(page)
        page.wait_for_timeout(2_500)
        assert panel_counters(page)["samples"] > before["samples"]
        assert frozen == page.evaluate(
            f"() => [...document.querySelectorAll('{PANEL} .jp-TrainWatch-chart')]"
            ".map(c => c.dataset.points)"
        )
        page.click(f"{PANEL} .jp-TrainWatch-pause")
        assert panel_state(page) == "live"

        # stale: the server stops answering (SIGSTOP: no sample, the socket stays open); the
        # browser alone notices after three intervals, and live comes back with the samples
        os.kill(lab.proc.pid, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            page.wait_for_function(
                f"() => document.querySelector('{PANEL}').dataset.state === 'stale'",
                timeout=15_000,
            )
            noticed = time.monotonic() - stopped_at
            age = page.evaluate(
                "() => { const i = window.trainwatchLab.stream.liveInput();"
                " return (i.nowMs - i.lastArrivalMs) / 1000; }"
            )
            state_text = page.locator(f"{PANEL} .jp-TrainWatch-state").inner_text()
            assert state_text.startswith("stale · no sample for"), state_text
            assert "jp-mod-stale" in (page.locator(STATUS).get_attribute("class") or "")
            page.locator(PANEL).screenshot(path=str(artifact_path("lab-panel-stale.png")))
        finally:
            os.kill(lab.proc.pid, signal.SIGCONT)
        # three 1 s intervals after the last sample (which came up to 1 s before the stop),
        # decided in the browser within a tick
        assert age >= 3 and 1.8 <= noticed <= 5.5, (age, noticed)
        page.wait_for_function(
            f"() => document.querySelector('{PANEL}').dataset.state === 'live'", timeout=30_000
        )

        set_theme(page, "JupyterLab Dark")
        page.wait_for_timeout(1_500)  # the charts redraw in the dark palette
        dark = verdict_contrast(page)
        assert min(dark.values()) >= 4.5, dark
        dark_bg = page.evaluate(CONTRAST_JS, f"{VERDICT} .jp-TrainWatch-facts")["background"]
        assert dark_bg != light_bg  # the theme really changed
        check_charts(page, "dark")
        screenshot_panel(page, "lab-panel-dark.png")
        print("verdict contrast, light:", light, "dark:", dark)
    assert mirror.close(10)
