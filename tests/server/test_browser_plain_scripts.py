"""The panel after a server restart tells a plain script's three endings (issue 35 item 1):
no TensorBoard, no GPU, started like nohup, saving 4 MiB every 0.5 s into a 64 MiB loop ext4
the Jupyter server watches (found by its writes, core.processes.writes); one is killed with
SIGKILL, one exits 0, one dies of Errno 28. The server restarts; the panel opened on the new
one shows the script's "while you were away" card: the full disk in `history why`'s words,
the SIGKILL folded under it as an earlier end, and nothing of the clean exit. Real
JupyterLab, real Chromium, screenshots of both themes at 1440x900."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.record.scenarios import history, plain_script_endings
from tests.record.test_why import connector_opens
from tests.server.test_browser import PANEL, lab_setup
from tests.server.test_browser_replay import CARD, _events, _lab_args, open_panel
from tests.support.env import need
from tests.support.lab import artifact_path, chromium_page, jupyter_lab, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.root]


def test_the_panel_tells_a_plain_script_s_three_endings_after_a_restart(
    tmp_path: Path, loop_ext4
) -> None:
    need(connector_opens(), "needs the process connector for exit statuses")
    disk = loop_ext4(size_mb=64)
    store = tmp_path / "state" / "history.sqlite"
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    # the watched path as one value (a list's repr there reads as one relative path)
    lab_args = [
        *args,
        *(a for a in _lab_args(store, disk.mountpoint) if not a.startswith("--TrainWatch.paths")),
        f"--TrainWatch.paths={disk.mountpoint}",
    ]
    with chromium_page((1440, 900)) as page:
        with jupyter_lab(root, extra_args=lab_args, env=env) as lab:
            open_panel(page, lab)
            page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.away === '0'")

            def events() -> str:
                return "\n".join(e["text"] for e in _events(lab))

            pids = plain_script_endings(events, disk.mountpoint, tmp_path)
        told = {k: history(store, "why", str(pid)).strip() for k, pid in pids.items()}
        print("\n".join(told.values()))
        # the server restarts (a new one on the same history); the reader comes back
        with jupyter_lab(root, extra_args=lab_args, env=env) as lab:
            open_panel(page, lab)
            # one card per run (issue 36): the three are one script in one folder, so its
            # newest bad end (the full disk) heads the card and the SIGKILL is folded under it
            said = page.locator(
                ".jp-TrainWatch-awaySentence", has_text=re.compile(re.escape(told["full"]))
            )
            card = page.locator(CARD).filter(has=said).first
            card.wait_for(state="visible", timeout=60_000)
            assert card.get_attribute("data-cause") == f"{disk.mountpoint} was full"
            assert card.get_attribute("data-ends") == "2"  # the clean exit is no bad end
            assert "save_only.py" in card.locator(".jp-TrainWatch-awayCommand").inner_text()
            card.locator(".jp-TrainWatch-awayDetails summary").click()
            full = card.locator(".jp-TrainWatch-awayDetails li")
            full.first.wait_for(state="visible")
            full_lines = full.all_text_contents()
            assert any("Errno 28" in e for e in full_lines), full_lines
            assert "exit status 1" in full_lines, full_lines
            earlier = card.locator(".jp-TrainWatch-awayEarlier")
            assert earlier.locator("summary").inner_text() == "1 earlier end"
            assert not earlier.locator("li").first.is_visible()  # folded until asked
            earlier.locator("summary").click()
            killed = earlier.locator("li")
            killed.first.wait_for(state="visible")
            assert killed.all_text_contents() == [told["killed"]]
            assert "SIGKILL" in told["killed"] and "full" not in told["killed"], told["killed"]
            # exit 0 is no bad end: no card, whatever its disk held
            texts = page.locator(".jp-TrainWatch-awaySentence").all_text_contents()
            assert told["clean"].endswith("it exited normally (status 0)")
            assert not any(t == told["clean"] for t in texts), texts
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
                set_theme(page, theme)
                page.wait_for_timeout(300)  # the charts re-read the theme on the next frame
                shot = artifact_path(f"panel-plain-script-{theme.split()[-1].lower()}.png")
                page.screenshot(path=str(shot))
