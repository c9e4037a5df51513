"""The panel at 1440x900 while a small tmpfs fills (issue 23), in a real JupyterLab and a
real Chromium: one story at the same moment (the verdict's count of warnings, the warning
rows, the status bar and the server's snapshot agree, and each view says its scope), no fill
estimate beside "Storage OK", the verdict, the warnings and the main charts in one screen with
the rest folded (and the reader's folds remembered), an sshfs path that never stays on
"checking...", JupyterLab's own icon for critical, and the screenshots of both themes."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.core.fake_nvml import FakeNvml, fake_nvml_lib, gpu
from tests.server.test_browser import PANEL, STATUS, VERDICT, lab_setup, open_section
from tests.support.lab import artifact_path, chromium_page, jupyter_lab, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.root]
__all__ = ["fake_nvml_lib"]  # fixture

MIB = 1024 * 1024

# everything the views say at one moment, read in one go (the same sample, or not compared)
MOMENT_JS = f"""() => {{
    const panel = document.querySelector('{PANEL}');
    const verdict = document.querySelector('{VERDICT}');
    const status = document.querySelector('{STATUS}');
    const warnings = panel.querySelector('.jp-TrainWatch-warnings');
    const latest = window.trainwatchLab.stream.latest;
    const notes = [...panel.querySelectorAll('.jp-TrainWatch-note')].map(n => n.textContent)
        .filter(Boolean);
    return {{
        t: Number(verdict.dataset.t), statusT: Number(status.dataset.t), latestT: latest.t,
        level: verdict.dataset.level, verdict: verdict.textContent,
        rows: warnings.querySelectorAll('.jp-TrainWatch-warning').length,
        count: Number(warnings.dataset.count || 0),
        summary: panel.querySelector("[data-section='warnings'] .jp-TrainWatch-sectionSummary")
            .textContent,
        status: status.textContent, statusWarnings: Number(status.dataset.warnings),
        statusTitle: status.title, statusScope: status.dataset.scope,
        statusShown: getComputedStyle(status, '::after').content,
        scope: panel.querySelector('.jp-TrainWatch-scope').textContent,
        sample: latest, notes,
        scroll: [panel.scrollHeight, panel.clientHeight],
        // where the folded rest starts, against the bottom of the panel on screen
        rest: [panel.querySelector("[data-section='more-charts']").getBoundingClientRect().top,
               panel.getBoundingClientRect().bottom, panel.scrollTop],
    }};
}}"""


def serious(sample: dict) -> list[dict]:
    return [w for w in sample["warnings"] if w["severity"] != "info"]


def check_moment(m: dict) -> None:
    """The views agree on the sample they show, and each says its scope."""
    n = len(serious(m["sample"]))
    assert m["rows"] == m["count"] == n, m
    assert m["summary"] == str(n)
    assert m["statusWarnings"] == n
    assert ("⚠ " + str(n) in m["status"]) == (n > 0), m["status"]
    if n:
        assert m["verdict"].startswith(f"{n} warning"), m["verdict"]
    else:
        assert m["verdict"].startswith("Storage OK"), m["verdict"]
    watched = len(m["sample"]["watched"])
    scope = f"this machine: {watched} watched path{'' if watched == 1 else 's'}"
    assert m["scope"] == m["statusScope"] == scope and scope in m["statusTitle"], m
    # ...and the status bar shows it after Python's words (its text stays the brief)
    short = f"this machine: {watched} path{'' if watched == 1 else 's'}"
    assert m["statusShown"] == f'" · {short}"', m["statusShown"]
    assert m["status"] == m["sample"]["headline"]["brief"]
    # a fill estimate is said only while a disk-filling warning is up, never beside OK
    filling = any(w["code"] == "disk-filling" for w in serious(m["sample"]))
    assert filling or not m["notes"], (m["verdict"], m["notes"])


def read_moment(page) -> dict:
    """The views at one moment where panel, status bar and stream show the same sample."""
    for _ in range(20):
        m = page.evaluate(MOMENT_JS)
        if m["t"] == m["statusT"] == m["latestT"]:
            return m
        page.wait_for_timeout(150)
    pytest.fail(f"the panel and the status bar never showed the same sample: {m}")


def fill(directory: Path, stop: threading.Event) -> None:
    """The scripted fill: 12 checkpoints of 3 MiB a second apart, a pause, then 1.5 MiB."""
    for i in range(12):
        if stop.wait(1.0):
            return
        (directory / f"epoch-{i:02}.ckpt").write_bytes(b"\1" * (3 * MIB))
    if not stop.wait(4.0):
        (directory / "last.ckpt").write_bytes(b"\1" * (3 * MIB // 2))


def screenshot(page, name: str, gpus: bool) -> Path:
    """The panel as it is at 1440x900 (no taller window: what a reader sees)."""
    path = artifact_path(name.replace(".png", "-gpu.png") if gpus else name)
    page.locator(PANEL).screenshot(path=str(path))
    return path


@pytest.fixture(params=[False, True], ids=["no-gpu", "gpu"])
def gpu_env(request, tmp_path: Path) -> dict[str, str]:
    """None (the machine has no NVIDIA driver: one info note), or a fake GPU through the real
    NVML bindings (the GPU chart opens with the main ones)."""
    if not request.param:
        return {}
    nvml = FakeNvml(request.getfixturevalue("fake_nvml_lib"), tmp_path / "nvml-script.txt")
    nvml.write([gpu(0, util=87, mem_used=52 * 2**30)])
    env = nvml.env()
    return {k: env[k] for k in ("FAKE_NVML_SCRIPT", "LD_LIBRARY_PATH")}


def test_the_panel_tells_one_story_while_a_tmpfs_fills(tmp_path, tmpfs_mount, sshfs_mount, gpu_env):
    gpus = bool(gpu_env)
    tmpfs = tmpfs_mount("40m")
    logs, ckpt = tmpfs.path / "logs", tmpfs.path / "ckpt"
    logs.mkdir()
    ckpt.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    env.update(gpu_env)
    stop = threading.Event()
    writer = threading.Thread(target=fill, args=(ckpt, stop), daemon=True)
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1440, 900)) as page:
        for p in (logs, ckpt, sshfs_mount.path):
            lab.api("trainwatch-lab/api/paths", "POST", {"path": str(p)})
        page.goto(lab.url("lab"))
        page.wait_for_function(
            "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0",
            timeout=90_000,
        )
        page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
        page.locator(PANEL).wait_for(state="visible", timeout=30_000)
        page.wait_for_function(
            f"() => document.querySelector('{PANEL}').dataset.state === 'live'", timeout=30_000
        )
        check_moment(read_moment(page))

        writer.start()
        try:
            moments = []
            worst = None
            deadline = time.monotonic() + 60
            while writer.is_alive() and time.monotonic() < deadline:
                m = read_moment(page)
                check_moment(m)
                moments.append(m)
                if m["level"] == "critical" and worst is None:
                    worst = screenshot(page, "panel-light-900.png", gpus)
                    light = m
                    # critical in JupyterLab's own icon (an SVG), in the verdict and the rows
                    icons = page.locator(
                        f"{PANEL} .jp-TrainWatch-warning.jp-mod-critical .jp-TrainWatch-levelIcon"
                        " svg, .jp-TrainWatch-verdict.jp-mod-critical .jp-TrainWatch-levelIcon svg"
                    ).count()
                page.wait_for_timeout(400)
            assert worst is not None, [x["verdict"] for x in moments]  # the fill was seen
            # the server's snapshot says the same as the panel, for the same sample
            for _ in range(30):
                snap = lab.api("trainwatch-lab/api/snapshot")
                m = read_moment(page)
                if m["t"] == snap["t"]:
                    break
                page.wait_for_timeout(200)
            else:
                pytest.fail("the panel never showed the sample the snapshot returned")
            assert m["sample"]["warnings"] == snap["warnings"] and m["count"] == len(serious(snap))
            assert m["sample"]["watched"] == snap["watched"]
        finally:
            stop.set()
            writer.join(30)

        # the verdict, the warnings and the main charts in one screen, with warnings up; the
        # rest folded, each section a line of its own (without a GPU: no scrolling at all)
        fit = {"gpu": gpus, "scroll_height_and_visible_px": light["scroll"], **light}
        fit = {k: fit[k] for k in ("gpu", "scroll_height_and_visible_px", "rest", "verdict")}
        artifact_path(f"panel-fit{'-gpu' if gpus else ''}.json").write_text(json.dumps(fit))
        print("the panel at 1440x900 during the fill:", fit)
        rest, bottom, scrolled = light["rest"]
        assert scrolled == 0 and rest <= bottom, light["rest"]
        height, visible = light["scroll"]
        assert gpus or height <= visible + 1, light["scroll"]
        folded = page.evaluate(
            f"""() => [...document.querySelectorAll('{PANEL} .jp-TrainWatch-section')]
                .filter(s => s.offsetParent !== null)
                .map(s => [s.dataset.section, s.dataset.open])"""
        )
        assert ["warnings", "true"] in folded and ["space", "true"] in folded, folded
        assert ["disks", "true"] in folded and ["paths", "false"] in folded, folded
        assert (["gpu", "true"] in folded) == gpus, folded
        # every open chart is drawn across the plot, not squeezed to its right edge
        spans = page.evaluate(
            """() => window.trainwatchLab.panel.charts
                .filter(c => c.node.offsetParent !== null && c._plot)
                .map(c => { const x = c._plot.scales.x, t = c._plot.data[0];
                    return [x.min, x.max, t[0], t[t.length - 1]]; })"""
        )
        assert spans and all(lo == first and hi == last for lo, hi, first, last in spans), spans

        # ...no glyph that Debian's fonts lack
        critical = sum(w["severity"] == "critical" for w in serious(light["sample"]))
        assert icons == critical + 1, (icons, critical)
        assert "⛔" not in page.locator(PANEL).inner_text()

        # the sshfs path: its kind and latency, never "checking..." for good
        open_section(page, "paths")
        row = page.locator(f"{PANEL} .jp-TrainWatch-pathRow[data-path='{sshfs_mount.path}']")
        page.wait_for_function(
            "(n) => n.querySelector('.jp-TrainWatch-kind').textContent === 'shared (fuse.sshfs)'",
            arg=row.element_handle(),
            timeout=30_000,
        )
        assert "checking" not in row.inner_text()
        # another client stops watching it: gone from the panel with the next samples (the
        # panel lists what each sample says is watched, not a copy fetched when it opened)
        quoted = urllib.parse.quote(str(sshfs_mount.path))
        lab.api(f"trainwatch-lab/api/paths?path={quoted}", "DELETE")
        row.wait_for(state="detached", timeout=15_000)
        assert "sshfs" not in page.locator(f"{PANEL} .jp-TrainWatch-paths").inner_text()

        # dark, with warnings still up (the tmpfs stays almost full), the paths folded again
        page.locator(f"{PANEL} [data-section='paths'] .jp-TrainWatch-sectionToggle").click()
        set_theme(page, "JupyterLab Dark")
        page.wait_for_timeout(1_500)  # the charts redraw in the dark palette
        dark = read_moment(page)
        page.mouse.move(700, 450)  # no hover, no focus ring on what was clicked
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        screenshot(page, "panel-dark-900.png", gpus)
        check_moment(dark)
        assert serious(dark["sample"]) and dark["rest"][0] <= dark["rest"][1]

        # what the reader opened stays open after a reload (the setting "sections")
        open_section(page, "kernels")
        page.wait_for_timeout(1_000)  # the settings are saved on the server
        page.reload()
        page.locator(PANEL).wait_for(state="visible", timeout=60_000)
        page.wait_for_function(
            f"""() => document.querySelector("{PANEL} [data-section='kernels']")
                .dataset.open === 'true'""",
            timeout=30_000,
        )
    for name in ("panel-light-900.png", "panel-dark-900.png"):  # (copied by hand to .github)
        assert artifact_path(name.replace(".png", "-gpu.png") if gpus else name).stat().st_size
