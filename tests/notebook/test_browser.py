"""The dashboard in a real browser: JupyterLab started here, Debian's Chromium via Playwright.

Screenshots land in .test-artifacts/ (repo root, gitignored) for the CI run to keep; the
README's pictures (the dashboard during a fill, light and dark, and the cell summary) are
taken by test_browser_views.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.fake_nvml import FakeNvml, fake_nvml_lib, gpu
from tests.support.lab import (
    LabServer,
    artifact_path,
    chromium_page,
    jupyter_lab,
    open_notebook,
    run_cell,
    set_theme,
    wait_cell_done,
    write_notebook,
)

from .kernel import REPO

pytestmark = pytest.mark.browser
__all__ = ["fake_nvml_lib"]  # fixture

# the setting of issue 11: JupyterLab at 1400x900 with the file browser open
VIEWPORT = {"width": 1400, "height": 900}
MAX_HEIGHT_ONE_PATH = 420
MAX_HEIGHT_THREE_PATHS_TWO_GPUS = 480

# points drawn by the io chart: the most segments of any of its line paths, plus one
POINTS_JS = """(cell) => {
    const paths = [...cell.querySelectorAll('.tw-chart-io path.line')];
    const counts = paths.map(p => ((p.getAttribute('d') || '').match(/L/g) || []).length + 1);
    const drawn = paths.filter(p => (p.getAttribute('d') || '').length > 0);
    return drawn.length ? Math.max(...counts) : 0;
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    root = tmp_path_factory.mktemp("lab-root")
    env = {
        "PYTHONPATH": str(REPO),  # kernels import the package even when not installed
        "TRAINWATCH_LAB_STATE_DIR": str(root.parent / "lab-state"),  # not the user's home
    }
    with jupyter_lab(root, env=env) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: LabServer) -> Iterator[Any]:
    with chromium_page() as p:
        yield p


def chart_points(page: Any, index: int) -> int:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index).element_handle()
    return page.evaluate(POINTS_JS, cell)


def cell_running(page: Any, index: int) -> bool:
    return page.evaluate(
        """(i) => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cell = panel.content.widgets[i];
            return cell.model.executionCount === null
                && panel.sessionContext.session.kernel.status === 'busy';
        }""",
        index,
    )


def test_chart_grows_while_a_cell_writes(lab: LabServer, page: Any) -> None:
    work = lab.root_dir / "work"
    work.mkdir()
    write_notebook(
        lab.root_dir / "live.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {work} --interval 0.5 --window 1m",
            "import os, time\n"
            "end = time.time() + 15\n"
            f"with open({str(work / 'blob.bin')!r}, 'wb') as fh:\n"
            "    while time.time() < end:\n"
            "        fh.write(os.urandom(1 << 20)); fh.flush(); os.fsync(fh.fileno())\n"
            "        time.sleep(0.1)\n"
            "'done'",
            "%%trainwatch\nimport time\ntime.sleep(4)",
        ],
    )
    open_notebook(page, lab, "live.ipynb")
    run_cell(page, 0)
    dash = run_cell(page, 1)
    dash.locator(".tw-chart-io").wait_for(timeout=60_000)
    page.wait_for_function(
        "(c) => (" + POINTS_JS + ")(c) >= 2",
        arg=dash.element_handle(),
        timeout=60_000,
    )
    page.screenshot(path=str(artifact_path("notebook-browser-1-started.png")), full_page=True)

    run_cell(page, 2, wait=False)
    page.wait_for_function(
        """() => {
            const p = window.jupyterapp.shell.currentWidget;
            return p.content.widgets[2].model.executionCount === null
                && p.sessionContext.session.kernel.status === 'busy';
        }""",
        timeout=30_000,
    )
    start = chart_points(page, 1)
    readings = []
    for _ in range(5):
        time.sleep(2.0)
        readings.append((chart_points(page, 1), cell_running(page, 2)))
    page.screenshot(path=str(artifact_path("notebook-browser-2-during-cell.png")), full_page=True)
    during = [n for n, running in readings if running]
    assert during, "the writing cell finished before we could look"
    assert max(during) > start, f"points did not grow during the cell: {start} -> {readings}"
    status = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-status")
    assert int(status.get_attribute("data-points") or 0) >= max(during) - 1
    # the throughput line really shows the writes: its label is the device under `work`
    legend = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-chart-io").inner_text()
    assert "write" in legend

    wait_cell_done(page, 2, timeout_ms=60_000)
    # theme-aware: the same line resolves to another colour in the dark theme
    line = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".tw-chart-io path.line").first
    light = line.evaluate("(el) => getComputedStyle(el).stroke")
    set_theme(page, "JupyterLab Dark")
    page.wait_for_timeout(1000)
    dark = line.evaluate("(el) => getComputedStyle(el).stroke")
    page.screenshot(path=str(artifact_path("notebook-browser-3-dark.png")), full_page=True)
    set_theme(page, "JupyterLab Light")
    assert light and dark and light != dark, (light, dark)

    # the controls work from the browser (the kernel is idle, so their comm messages land)
    dash = page.locator(".jp-Notebook .jp-Cell").nth(1)
    dash.get_by_role("button", name="Pause").click()
    dash.locator(".tw-status[data-state='paused']").wait_for(timeout=30_000)
    paused_at = chart_points(page, 1)
    page.wait_for_timeout(2000)
    assert chart_points(page, 1) == paused_at
    dash.get_by_role("button", name="Resume").click()
    dash.locator(".tw-status[data-state='live']").wait_for(timeout=30_000)
    dash.get_by_role("button", name="Details").click()  # export sits under Details
    dash.get_by_role("button", name="Export CSV").click()
    saved = dash.locator(".tw-export")
    saved.wait_for(timeout=30_000)
    assert Path(saved.get_attribute("data-path") or "").read_text().startswith("t,")

    # %%trainwatch: a live strip while the cell runs, then the summary in its place
    strip_cell = run_cell(page, 3, wait=False)
    strip_cell.locator(".tw-strip").wait_for(timeout=30_000)
    page.wait_for_function(
        "(c) => (c.querySelector('.tw-strip') || {}).dataset?.samples > 0",
        arg=strip_cell.element_handle(),
        timeout=30_000,
    )
    strip_cell.screenshot(path=str(artifact_path("notebook-browser-5-strip.png")))
    wait_cell_done(page, 3, timeout_ms=60_000)
    strip_cell.locator(".tw-cell-summary").wait_for(timeout=30_000)
    assert strip_cell.locator(".tw-strip").count() == 0
    strip_cell.screenshot(path=str(artifact_path("notebook-browser-6-summary.png")))


def test_writer_on_sshfs_alerts_under_its_cell(lab: LabServer, page: Any, sshfs_mount: Any) -> None:
    logdir = Path(sshfs_mount.path) / "runs"
    write_notebook(
        lab.root_dir / "sshfs.ipynb",
        [
            "%load_ext trainwatch_lab",
            "class SummaryWriter:\n"
            "    def __init__(self, log_dir):\n"
            "        self.log_dir = log_dir\n"
            f"writer = SummaryWriter({str(logdir)!r})",
            "x = 1",
        ],
    )
    open_notebook(page, lab, "sshfs.ipynb")
    run_cell(page, 0)
    cell = run_cell(page, 1)
    alert = cell.locator(".tw-inline-alerts [data-code='shared-mount']")
    alert.wait_for(timeout=30_000)
    text = alert.inner_text()
    assert str(logdir) in text and "fuse.sshfs" in text and "Fix:" in text
    cell.screenshot(path=str(artifact_path("notebook-browser-4-sshfs-alert.png")))
    later = run_cell(page, 2)
    assert later.locator(".tw-inline-alerts").count() == 0


def test_warning_from_the_sampler_thread_shows_under_the_running_cell(
    lab: LabServer, page: Any
) -> None:
    """A condition that starts while cell 2 runs (threshold lowered so a real statvfs trips
    disk-almost-full) is rendered in cell 2's output area, not in cell 1's."""
    watched = lab.root_dir / "thread-alert"
    watched.mkdir()
    write_notebook(
        lab.root_dir / "thread.ipynb",
        [
            "import dataclasses, time\n"
            "from trainwatch_lab import TrainWatch\n"
            "from trainwatch_lab.core.defaults import DEFAULTS\n"
            "tw = TrainWatch([], interval=0.3, probe=False,\n"
            "                defaults=dataclasses.replace(DEFAULTS, full_fraction=1.0))\n"
            "tw",
            f"tw.add_path({str(watched)!r})\ntime.sleep(4)",
        ],
    )
    open_notebook(page, lab, "thread.ipynb")
    first = run_cell(page, 0)
    second = run_cell(page, 1, wait=False)
    second.locator(".tw-inline-alerts [data-code='disk-almost-full']").wait_for(timeout=30_000)
    assert cell_running(page, 1)  # it arrived while the cell was still running
    wait_cell_done(page, 1)
    assert first.locator(".tw-inline-alerts").count() == 0
    # the dashboard lists it too
    assert first.locator(".tw-alerts-pane [data-code='disk-almost-full']").count() == 1
    second.screenshot(path=str(artifact_path("notebook-browser-7-thread-alert.png")))


# -- the compact dashboard: size, charts, theme, states (issue 11) ---------------------------

# per chart: the legend line, the plot area, the figure, each tick label (page coordinates)
GEOMETRY_JS = """(root) => {
    const box = (el) => { const r = el.getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom,
                width: r.width, height: r.height}; };
    return [...root.querySelectorAll('.tw-chart')].filter(c => c.offsetParent).map(c => ({
        name: [...c.classList].find(k => k.startsWith('tw-chart-')),
        head: box(c.querySelector('.tw-chart-head')),
        keys: [...c.querySelectorAll('.tw-key')].map(box),
        plot: box(c.querySelector('.plotarea_background')),
        figure: box(c.querySelector('.bqplot')),
        ticks: [...c.querySelectorAll('.axis .tick text')]
            .filter(t => t.textContent && getComputedStyle(t).display !== 'none')
            .map(t => ({text: t.textContent, ...box(t)})),
    }));
}"""

# WCAG contrast of an element's text against what is painted under it: the backgrounds of
# its ancestors composited in a 1x1 canvas (alpha and color-mix() included), then the text
CONTRAST_JS = """(el) => {
    const ctx = Object.assign(document.createElement('canvas'), {width: 1, height: 1})
        .getContext('2d', {willReadFrequently: true});
    const paint = (css) => { ctx.fillStyle = css; ctx.fillRect(0, 0, 1, 1);
        return [...ctx.getImageData(0, 0, 1, 1).data]; };
    const chain = []; for (let n = el; n; n = n.parentElement) chain.unshift(n);
    let bg = paint('#fff');
    for (const n of chain) bg = paint(getComputedStyle(n).backgroundColor);
    const fg = paint(getComputedStyle(el).color);
    const lum = (px) => px.slice(0, 3).map(c => c / 255)
        .map(c => c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
        .reduce((s, c, i) => s + c * [0.2126, 0.7152, 0.0722][i], 0);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return {ratio: (hi + 0.05) / (lo + 0.05), fg: fg.join(','), bg: bg.join(',')};
}"""

# the window dropdown shows its whole label ("10 min", not "10 mir"): text + arrow fit
SELECT_FITS_JS = """(sel) => {
    const cs = getComputedStyle(sel);
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    const widest = Math.max(...[...sel.options].map(o => ctx.measureText(o.text).width));
    const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    return {widest, room};
}"""

STATE_JS = """(root) => {
    const head = root.querySelector('.tw-head');
    const shown = (sel) => { const el = head.querySelector(sel); if (!el) return false;
        const cs = getComputedStyle(el);
        return cs.visibility === 'visible' && Number(cs.opacity) > 0.5; };
    return {state: head.dataset.state, samples: Number(head.dataset.samples),
            window: head.dataset.window, live: shown('.tw-now'), stale: shown('.tw-stale')};
}"""


def cell_executing(page: Any, index: int) -> bool:
    """Cell ``index`` is running. Not the kernel's status: with ipykernel 7 a widget message
    handled on a subshell reports busy/idle too, and JupyterLab shows the last one."""
    return page.evaluate(
        """(i) => {
            const m = window.jupyterapp.shell.currentWidget.content.widgets[i].model;
            return m.executionState !== undefined ? m.executionState === 'running'
                : m.executionCount === null;
        }""",
        index,
    )


def show_file_browser(page: Any) -> None:
    page.set_viewport_size(VIEWPORT)
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
    page.wait_for_selector("#filebrowser", state="visible", timeout=30_000)


def dashboard(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".trainwatch")


def check_layout(page: Any, dash: Any, max_height: int, charts: int) -> float:
    """Height within ``max_height``; legends above the plots, ticks inside the figures."""
    height = dash.bounding_box()["height"]
    assert height <= max_height, f"dashboard is {height:.0f} px tall (at most {max_height})"
    geometry = page.evaluate(GEOMETRY_JS, dash.element_handle())
    assert len(geometry) == charts, [g["name"] for g in geometry]
    for g in geometry:
        plot, fig = g["plot"], g["figure"]
        assert g["keys"], f"{g['name']}: no legend"
        for key in [g["head"], *g["keys"]]:
            assert key["bottom"] <= plot["top"] + 0.5, f"{g['name']}: legend over the plot"
        texts = [t["text"] for t in g["ticks"]]
        assert len(texts) >= 4, f"{g['name']}: ticks {texts}"
        for t in g["ticks"]:
            inside = (
                t["left"] >= fig["left"] - 0.5
                and t["right"] <= fig["right"] + 0.5
                and t["top"] >= fig["top"] - 0.5
                and t["bottom"] <= fig["bottom"] + 0.5
            )
            assert inside, f"{g['name']}: tick {t['text']!r} leaves the figure: {t} {fig}"
        x_labels = [t["text"] for t in g["ticks"] if ":" in t["text"]]
        assert len(x_labels) >= 2 and len(set(x_labels)) == len(x_labels), x_labels
    fits = page.evaluate(SELECT_FITS_JS, dash.locator("select").element_handle())
    assert fits["widest"] <= fits["room"], f"window dropdown clips its label: {fits}"
    return height


def check_contrast(page: Any, dash: Any, theme: str) -> None:
    """Looked up in the same call that measures: each tick replaces the header's HTML, and
    a handle taken before may be detached by then (no computed style: a false 1.0)."""
    root = dash.element_handle()
    for selector in (".tw-verdict", ".tw-facts"):
        c = page.evaluate(f"(r) => ({CONTRAST_JS})(r.querySelector('{selector}'))", root)
        assert c["ratio"] >= 4.5, f"{theme}: contrast {selector} {c['ratio']:.2f} ({c})"


def wait_state(page: Any, dash: Any, want: dict[str, Any], timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        st = page.evaluate(STATE_JS, dash.element_handle())
        if all(st.get(k) == v for k, v in want.items()):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"dashboard state {st}, wanted {want}")
        time.sleep(0.1)


def test_compact_dashboard_beside_the_cell(lab: LabServer, page: Any) -> None:
    """One path, no GPU, 1400x900 with the file browser open: at most 420 px, a verdict line
    first, legends above the plots, ticks inside, readable in both themes; Details opens
    on demand and stays open for this notebook when the dashboard is made again."""
    work = lab.root_dir / "compact"
    work.mkdir()
    write_notebook(
        lab.root_dir / "compact.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch {work} --interval 0.5",
            "import os\nfor _ in range(6):\n"
            f"    with open({str(work / 'blob.bin')!r}, 'wb') as fh:\n"
            "        fh.write(os.urandom(8 << 20)); os.fsync(fh.fileno())",
            f"%trainwatch {work} --interval 0.5",
        ],
    )
    open_notebook(page, lab, "compact.ipynb")
    show_file_browser(page)
    run_cell(page, 0)
    run_cell(page, 1)
    dash = dashboard(page, 1)
    wait_state(page, dash, {"state": "live"})
    run_cell(page, 2)
    page.wait_for_function(
        "(c) => (" + POINTS_JS + ")(c) >= 6",
        arg=page.locator(".jp-Notebook .jp-Cell").nth(1).element_handle(),
        timeout=60_000,
    )
    head = dash.locator(".tw-head")
    assert head.get_attribute("data-level") in ("ok", "warning", "critical")
    assert dash.locator(".tw-verdict").inner_text().strip()  # the headline's verdict
    height = check_layout(page, dash, MAX_HEIGHT_ONE_PATH, charts=2)
    print(f"one path, no GPU: {height:.0f} px")
    check_contrast(page, dash, "light")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-one-path.png")))
    set_theme(page, "JupyterLab Dark")
    page.wait_for_timeout(500)
    check_contrast(page, dash, "dark")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-one-path-dark.png")))
    set_theme(page, "JupyterLab Light")

    # details: closed at first, opened on demand, remembered when %trainwatch runs again
    assert not dash.locator(".tw-details").is_visible()
    dash.get_by_role("button", name="Details").click()
    dash.locator(".tw-details .tw-paths").wait_for(timeout=30_000)
    dash.locator(".tw-chart-await .plotarea_background").wait_for(timeout=30_000)
    dash.screenshot(path=str(artifact_path("notebook-dashboard-details.png")))
    again = run_cell(page, 3)
    again.locator(".trainwatch .tw-details .tw-paths").wait_for(timeout=30_000)
    assert again.locator(".trainwatch .tw-details").is_visible()
    again.locator(".trainwatch").get_by_role("button", name="Details").click()
    again.locator(".trainwatch .tw-details").wait_for(state="hidden", timeout=30_000)


@pytest.fixture(scope="module")
def gpu_lab(tmp_path_factory: pytest.TempPathFactory, fake_nvml_lib: Path) -> Iterator[LabServer]:
    """A second JupyterLab whose kernels see two (fake) GPUs through NVML."""
    root = tmp_path_factory.mktemp("gpu-lab-root")
    script_dir = tmp_path_factory.mktemp("gpu-lab-nvml")
    nvml = FakeNvml(fake_nvml_lib, script_dir / "script.txt")
    nvml.write([gpu(0, util=87, mem_used=52 * 2**30), gpu(1, util=41, mem_used=20 * 2**30)])
    env = nvml.env({"TRAINWATCH_LAB_STATE_DIR": str(root.parent / "gpu-lab-state")})
    with jupyter_lab(root, env=env) as server:
        yield server


def test_three_paths_two_gpus_light_and_dark(gpu_lab: LabServer, page: Any) -> None:
    """Three paths (two on one filesystem, one tmpfs) and two GPUs: at most 480 px, one
    space line per filesystem; the README's light and dark pictures."""
    logs, ckpt = gpu_lab.root_dir / "logs", gpu_lab.root_dir / "checkpoints"
    logs.mkdir()
    ckpt.mkdir()
    write_notebook(
        gpu_lab.root_dir / "gpus.ipynb",
        [
            "%load_ext trainwatch_lab",
            f"%trainwatch --logdir {logs} {ckpt} /dev/shm --interval 0.5",
            "import os, time\nfor step in range(24):  # checkpoints of 8 to 40 MiB\n"
            f"    with open({str(ckpt / 'step.pt')!r}, 'wb') as fh:\n"
            "        fh.write(os.urandom((8 + 32 * (step % 3 == 2)) << 20))\n"
            "        os.fsync(fh.fileno())\n"
            "    time.sleep(0.4)",
        ],
    )
    open_notebook(page, gpu_lab, "gpus.ipynb")
    show_file_browser(page)
    run_cell(page, 0)
    run_cell(page, 1)
    run_cell(page, 2)
    dash = dashboard(page, 1)
    space = dash.locator(".tw-chart-space .tw-key")
    assert space.count() == 2, space.all_inner_texts()  # / (or the fs of root) and /dev/shm
    assert any("/dev/shm" in t for t in space.all_inner_texts())
    assert dash.locator(".tw-chart-gpu .tw-key").count() == 4
    height = check_layout(page, dash, MAX_HEIGHT_THREE_PATHS_TWO_GPUS, charts=3)
    print(f"three paths, two GPUs: {height:.0f} px")
    check_contrast(page, dash, "light")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-gpus.png")))
    set_theme(page, "JupyterLab Dark")
    page.wait_for_timeout(500)
    check_contrast(page, dash, "dark")
    dash.screenshot(path=str(artifact_path("notebook-dashboard-gpus-dark.png")))
    set_theme(page, "JupyterLab Light")


def test_stale_while_a_c_call_holds_the_gil_then_stopped(lab: LabServer, page: Any) -> None:
    """``sum(range(n))`` runs in C and never lets the sampler thread in: no sample arrives,
    and the header turns stale by itself (a CSS clock in the browser), then live again.
    ``%trainwatch stop``: stopped, Pause and the window disabled."""
    write_notebook(
        lab.root_dir / "stale.ipynb",
        [
            "%load_ext trainwatch_lab",
            "%trainwatch --interval 0.5 --no-probe",
            "import time\nt = time.perf_counter(); sum(range(10**7))\n"
            "n = int(10 / (time.perf_counter() - t) * 10**7)  # about 10 s of C, GIL held",
            "sum(range(n))",
            "%trainwatch stop",
        ],
    )
    open_notebook(page, lab, "stale.ipynb")
    run_cell(page, 0)
    run_cell(page, 1)
    dash = dashboard(page, 1)
    run_cell(page, 2)
    page.wait_for_function(
        "(c) => Number(c.querySelector('.tw-head').dataset.samples) >= 4",
        arg=dash.element_handle(),
        timeout=30_000,
    )
    before = wait_state(page, dash, {"state": "live", "live": True, "stale": False})
    run_cell(page, 3, wait=False)
    held = wait_state(page, dash, {"stale": True, "live": False}, timeout_s=8)
    assert cell_executing(page, 3), "the C call ended before the header turned stale"
    dash.screenshot(path=str(artifact_path("notebook-dashboard-stale.png")))
    page.wait_for_timeout(1000)
    assert page.evaluate(STATE_JS, dash.element_handle())["samples"] == held["samples"]
    wait_cell_done(page, 3, timeout_ms=120_000)
    after = wait_state(page, dash, {"live": True, "stale": False}, timeout_s=10)
    assert after["samples"] > held["samples"] >= before["samples"]

    run_cell(page, 4)
    wait_state(page, dash, {"state": "stopped"})
    assert dash.get_by_role("button", name="Pause").is_disabled()
    assert dash.locator("select").is_disabled()
    assert not page.evaluate(STATE_JS, dash.element_handle())["stale"]  # stopped is final
    dash.screenshot(path=str(artifact_path("notebook-dashboard-stopped.png")))


def test_pause_and_window_answer_during_a_sleeping_cell(lab: LabServer, page: Any) -> None:
    """JupyterLab 4.4+ with ipykernel 7 sends widget messages on a kernel subshell, so Pause
    and the window selector work while ``time.sleep(25)`` runs in the main shell."""
    import ipykernel
    import jupyterlab

    lab_version = tuple(int(x) for x in jupyterlab.__version__.split(".")[:2])
    assert lab_version >= (4, 4) and int(ipykernel.__version__.split(".")[0]) >= 7
    write_notebook(
        lab.root_dir / "sleep.ipynb",
        [
            "%load_ext trainwatch_lab",
            "%trainwatch --interval 0.5 --no-probe --window 1m",
            "import time\ntime.sleep(25)",
        ],
    )
    open_notebook(page, lab, "sleep.ipynb")
    run_cell(page, 0)
    run_cell(page, 1)
    dash = dashboard(page, 1)
    wait_state(page, dash, {"state": "live"})
    run_cell(page, 2, wait=False)
    page.wait_for_function(
        """() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status
            === 'busy'""",
        timeout=30_000,
    )
    assert cell_executing(page, 2)
    t0 = time.monotonic()
    dash.get_by_role("button", name="Pause").click()
    wait_state(page, dash, {"state": "paused"}, timeout_s=10)
    paused_s = time.monotonic() - t0
    dash.locator("select").select_option(label="5 min")
    wait_state(page, dash, {"window": "300"}, timeout_s=10)
    dash.get_by_role("button", name="Resume").click()
    wait_state(page, dash, {"state": "live"}, timeout_s=10)
    assert cell_executing(page, 2), "the sleeping cell ended before the controls were tried"
    print(f"Pause answered in {paused_s * 1000:.0f} ms during time.sleep(25)")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
    wait_cell_done(page, 2, timeout_ms=60_000)
