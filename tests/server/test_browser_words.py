"""The panel's words at 250 px (issue 36 item 3): a path breaks after a slash, never inside a
name ("notebook|s"), and a warning's backticks are set as code, not shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.server.test_browser import PANEL, lab_setup, open_section, widen_sidebar
from tests.server.test_browser_replay import open_panel
from tests.support.lab import artifact_path, chromium_page, jupyter_lab, set_theme

pytestmark = pytest.mark.browser

# the lines each piece of a path takes: a name split across two lines takes two
PIECE_LINES_JS = """(row) => {
    const name = row.querySelector('.jp-TrainWatch-pathName');
    const out = {};
    for (const node of name.childNodes) {
        if (node.nodeType !== Node.TEXT_NODE) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        out[node.data] = tops.size;
    }
    return {pieces: out, wbr: name.querySelectorAll('wbr').length};
}"""


def test_at_250_px_a_path_breaks_after_a_slash(tmp_path: Path) -> None:
    root = tmp_path / "root"
    deep = root / "projects" / "trainwatch-experiments" / "notebooks"
    deep.mkdir(parents=True)
    args, env = lab_setup(tmp_path)
    env["TRAINWATCH_LAB_STATE_DIR"] = str(tmp_path / "state")
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1440, 900)) as page:
        lab.api("trainwatch-lab/api/paths", "POST", {"path": str(deep)})
        open_panel(page, lab)
        widen_sidebar(page, 250)
        open_section(page, "paths")
        row = page.locator(f"{PANEL} .jp-TrainWatch-pathRow[data-path='{deep}']")
        row.wait_for(state="visible", timeout=60_000)
        page.wait_for_timeout(500)  # the sidebar's width settled, the row drawn in it
        seen = row.evaluate(PIECE_LINES_JS)
        assert seen["wbr"] == str(deep).count("/"), seen  # a break may follow each "/"
        # never "notebook|s": a name that fits a line stays on one (the pytest directory's
        # name, longer than the panel, may still break where it must)
        for piece in ("notebooks", "projects/", "trainwatch-experiments/"):
            assert seen["pieces"].get(piece) == 1, json.dumps(seen)
        width = page.locator(PANEL).bounding_box()["width"]
        assert width <= 300, width
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(300)
            row.screenshot(path=str(artifact_path(f"panel-path-250-{theme}.png")))
        set_theme(page, "JupyterLab Light")


def test_a_fix_shows_its_code_as_code_not_backticks(tmp_path: Path, sshfs_mount) -> None:
    """shared-mount's fix quotes `SummaryWriter(local_mirror(share_dir))`: the panel showed
    the backticks (issue 36 item 3); it sets the quote in code type."""
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    env["TRAINWATCH_LAB_STATE_DIR"] = str(tmp_path / "state")
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1440, 900)) as page:
        lab.api("trainwatch-lab/api/paths", "POST", {"path": str(sshfs_mount.path)})
        open_panel(page, lab)
        warning = page.locator(f"{PANEL} .jp-TrainWatch-warning[data-code='shared-mount']")
        warning.wait_for(timeout=90_000)
        warning.locator("summary").click()
        fix = warning.locator(".jp-TrainWatch-fix")
        fix.wait_for(state="visible")
        text = fix.text_content() or ""
        assert "`" not in text, text
        codes = fix.locator("code").all_text_contents()
        assert "SummaryWriter(local_mirror(share_dir))" in codes, codes
        assert "trainwatch-lab mirror LOCAL_DIR SHARE_DIR" in codes, codes
        for theme in ("light", "dark"):
            set_theme(page, f"JupyterLab {theme.title()}")
            page.wait_for_timeout(300)
            warning.screenshot(path=str(artifact_path(f"panel-fix-code-{theme}.png")))
        set_theme(page, "JupyterLab Light")
