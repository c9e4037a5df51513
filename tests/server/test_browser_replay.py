"""After the crash, in the panel (issue 27 item 5): a run ends badly while JupyterLab records,
the Jupyter server is restarted, and the panel, opened on the new server, shows a "while you
were away" card with the sentence and its evidence; "Show on charts" replays the run's last
hour from the recorded history with the events marked. Three real endings: a training script
dying of a full loop-device ext4, an OOM kill in a memory cgroup, a kernel killed with
SIGKILL. Real JupyterLab, real Chromium, screenshots of both themes at 1440x900."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.record.scenarios import HOG, memory_cgroup
from tests.server.test_browser import PANEL, lab_setup
from tests.support.lab import LabServer, artifact_path, chromium_page, jupyter_lab, set_theme
from tests.support.mounts import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.root]
__all__ = ["memory_cgroup"]  # fixture

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "trainwatch_lab"]
CARD = f"{PANEL} .jp-TrainWatch-awayCard"


def _lab_args(store: Path, watched: Path) -> list[str]:
    return [
        "--TrainWatch.record=True",
        f"--TrainWatch.record_path={store}",
        "--TrainWatch.interval=0.5",
        "--TrainWatch.record_every_s=0.5",
        "--TrainWatch.watch_processes=True",
        "--TrainWatch.probe=False",
        f"--TrainWatch.paths={[str(watched)]!r}",
    ]


def _events(lab: LabServer) -> list[dict]:
    since = time.time() - 3600
    path = f"trainwatch-lab/api/recorded/events?since={since}"
    try:
        return lab.api(path)["events"]
    except OSError:  # no history file yet (404)
        return []


def _recorded(lab: LabServer, kind: str, subject: str) -> bool:
    """The server's recorder flushed an event of ``kind`` about ``subject`` (every 10 s)."""
    return any(e["kind"] == kind and subject in e["subject"] for e in _events(lab))


def die_of_a_full_disk(lab: LabServer, where: Path, tmp_path: Path) -> str:
    """python train.py under nohup, writing TensorBoard-like logs and checkpoints to a 24 MB
    ext4 until ``OSError: [Errno 28]``."""
    script = [sys.executable, str(ROOT / "tests/record/train_until_full.py"), str(where), "8"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "nohup.out", "wb") as out:
        train = subprocess.Popen(
            ["nohup", *script], stdout=out, stderr=out, env=env, cwd=tmp_path,
            start_new_session=True,
        )  # fmt: skip
        assert train.wait(timeout=180) == 1
    assert b"Errno 28" in (tmp_path / "nohup.out").read_bytes()
    assert wait_until(lambda: _recorded(lab, "process-ended", "train_until_full"), 90)
    return r"train_until_full\.py ended at \d\d:\d\d:\d\d after \d+ s: \S+ was full \("


def oom_kill(cgroup: Path, store: Path) -> Callable[[LabServer, Path, Path], str]:
    """A script run by ``trainwatch-lab run`` (writing the same store as the server) that
    allocates past its memory cgroup's 64 MiB and is killed by the kernel."""

    def run(lab: LabServer, _where: Path, _tmp: Path) -> str:
        inner = " ".join(
            [*CLI, "run", "--store", str(store), "--", sys.executable, "-c", repr(HOG.format(1))]
        )
        done = subprocess.run(
            ["sh", "-c", f"echo $$ > {cgroup}/cgroup.procs; exec {inner}"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 128 + signal.SIGKILL, done.stderr
        assert wait_until(lambda: _recorded(lab, "run-ended", ""), 60)
        return r"ended at \d\d:\d\d:\d\d after \d+ s: the kernel's out-of-memory killer ended it"

    return run


def kill_a_kernel(lab: LabServer, _where: Path, _tmp: Path) -> str:
    """A kernel started through the server, then SIGKILLed (the server's kernel manager sees
    it go; the recorder says so, with no cause it could see)."""
    kid = lab.api("api/kernels", "POST", {"name": "python3"})["id"]

    def pid() -> int | None:
        kernels = lab.api("trainwatch-lab/api/snapshot").get("kernels") or {}
        return (kernels.get(kid) or {}).get("pid")

    assert wait_until(lambda: pid() is not None and _recorded(lab, "kernel-started", ""), 90)
    os.kill(pid(), signal.SIGKILL)
    assert wait_until(lambda: _recorded(lab, "kernel-ended", "kernel"), 90)
    return r"^kernel \S+ ended at \d\d:\d\d:\d\d after \d+ s; no cause seen"


def open_panel(page, lab: LabServer) -> None:
    page.goto(lab.url("lab"))
    page.wait_for_function(
        "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0",
        timeout=90_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('trainwatch-lab:open')")
    page.locator(PANEL).wait_for(state="visible", timeout=30_000)


def replaying(page, words: str, unless: str = "loading") -> str:
    """Wait for the replay line to say ``words`` (loaded, and not ``unless``); returns it."""
    line = page.locator(f"{PANEL} .jp-TrainWatch-replayText")
    page.wait_for_function(
        """([node, w, u]) => {
            const text = node.textContent;
            return text.includes(w) && !text.includes(u) && !text.includes('loading');
        }""",
        arg=[line.element_handle(), words, unless],
        timeout=60_000,
    )
    return line.text_content()


def use_the_range_menu(page) -> None:
    """The menu's ranges as a reader picks them: since the restart, the last hour, a chosen
    window (a bad one says what is wrong in one line and changes nothing)."""
    menu = f"{PANEL} .jp-TrainWatch-rangeSelect"
    page.select_option(menu, "restart")
    assert re.match(r"Replaying \d\d:\d\d – \d\d:\d\d", replaying(page, "(since the server"))
    page.select_option(menu, "last:1")
    replaying(page, "(last 1 h)")
    # the replay's first drawn chart, as the issue measures it (printed, never asserted)
    took = page.evaluate(
        """async () => {
            const t0 = performance.now();
            await window.trainwatchLab.panel.setRange({kind: 'last', hours: 24});
            return performance.now() - t0;
        }"""
    )
    print(f"replay of the last 24 h drawn {took:.0f} ms after it was asked for")
    page.select_option(menu, "last:1")
    replaying(page, "(last 1 h)")
    page.select_option(menu, "window")
    chooser = page.locator(f"{PANEL} .jp-TrainWatch-window")
    chooser.wait_for(state="visible")
    prefilled = chooser.locator("input").evaluate_all("(inputs) => inputs.map(i => i.value)")
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d$", v) for v in prefilled), prefilled
    chooser.locator(".jp-TrainWatch-windowFrom").fill(prefilled[1])  # from == to
    chooser.locator(".jp-TrainWatch-windowShow").click()
    error = chooser.locator(".jp-TrainWatch-windowError").text_content()
    assert error == "'from' must be before 'to'", error
    assert "(last 1 h)" in page.locator(f"{PANEL} .jp-TrainWatch-replayText").text_content()
    chooser.locator(".jp-TrainWatch-windowFrom").fill(prefilled[0])
    chooser.locator(".jp-TrainWatch-windowShow").click()
    line = replaying(page, "Replaying", unless="(last")
    # the two times chosen, and no words after them (the dates too, near midnight)
    assert prefilled[0][-5:] in line and line.endswith(prefilled[1][-5:]), line
    assert not chooser.is_visible()


@pytest.mark.parametrize(
    "ending",
    ["full-disk", "oom-kill", pytest.param("kernel-killed", marks=pytest.mark.kernel)],
)
def test_the_panel_explains_a_run_that_ended_while_nobody_looked(
    request, tmp_path: Path, loop_ext4, ending: str
) -> None:
    disk = loop_ext4(size_mb=24)
    store = tmp_path / "state" / "history.sqlite"
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    end = {
        "full-disk": die_of_a_full_disk,
        "kernel-killed": kill_a_kernel,
    }.get(ending) or oom_kill(request.getfixturevalue("memory_cgroup"), store)
    with chromium_page((1440, 900)) as page:
        with jupyter_lab(
            root, extra_args=[*args, *_lab_args(store, disk.mountpoint)], env=env
        ) as lab:
            open_panel(page, lab)
            # nothing ended yet: no card
            page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.away === '0'")
            assert page.locator(CARD).count() == 0
            sentence = end(lab, disk.mountpoint, tmp_path)
        # the server restarts (a new one on the same history); the reader comes back
        with jupyter_lab(
            root, extra_args=[*args, *_lab_args(store, disk.mountpoint)], env=env
        ) as lab:
            open_panel(page, lab)
            # this run's card (another test's run on this machine may have its own)
            if ending == "full-disk":
                sentence = sentence.replace(r"\S+", re.escape(str(disk.mountpoint)) + r"\S*")
            said = page.locator(".jp-TrainWatch-awaySentence", has_text=re.compile(sentence))
            card = page.locator(CARD).filter(has=said).first
            card.wait_for(state="visible", timeout=60_000)
            text = card.locator(".jp-TrainWatch-awaySentence").text_content()
            evidence = card.locator(".jp-TrainWatch-awayDetails .jp-TrainWatch-awayEvidence li")
            evidence = evidence.all_text_contents()
            # which run (issue 36): its command and folder, under one header with Dismiss all
            run = card.locator(".jp-TrainWatch-awayRun").text_content()
            if ending == "full-disk":
                assert "train_until_full" in run and " in /" in run, run
            assert page.locator(f"{PANEL} .jp-TrainWatch-awayDismissAll").count() == 1
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
                set_theme(page, theme)
                page.wait_for_timeout(300)
                card.screenshot(
                    path=str(artifact_path(f"away-card-{ending}-{theme.split()[-1].lower()}.png"))
                )
            set_theme(page, "JupyterLab Light")
            if ending == "full-disk":
                assert re.search(r"was full \(\d[\d.]* k?B free at \d\d:\d\d:\d\d", text), text
                assert re.match(r"\d[\d.]* k?B free at \d\d:\d\d:\d\d$", evidence[0]), evidence
                assert any("Errno 28" in e for e in evidence), evidence
            elif ending == "oom-kill":
                assert any(e.startswith("oom_kill 0 -> 1 in cgroup") for e in evidence), evidence
            else:  # nothing embellished: no cause, only what is known (how it was killed);
                # its stderr is the server's log (jupyter-lab.log), never quoted as its own
                assert card.get_attribute("data-cause") == "", text
                assert all(e == "killed by SIGKILL" for e in evidence), evidence
                # the kernel restarted after the kill, shut down with the first server: it
                # was asked, no card
                kernels = page.locator(".jp-TrainWatch-awaySentence", has_text="kernel ")
                assert kernels.count() == 1, kernels.all_text_contents()
            # "Show on charts": the run's last hour, replayed, with its events marked
            card.locator(".jp-TrainWatch-awayShow").click()
            page.wait_for_function(
                f"() => document.querySelector('{PANEL}').dataset.range === 'replay'",
                timeout=60_000,
            )
            banner = page.locator(f"{PANEL} .jp-TrainWatch-replay").text_content()
            assert re.match(r"Replaying \d\d:\d\d – \d\d:\d\d · back to live", banner), banner
            # the header says so too, not "live" with a green dot (issue 36)
            state = page.locator(f"{PANEL} .jp-TrainWatch-state")
            page.wait_for_function(
                f"() => document.querySelector('{PANEL} .jp-TrainWatch-state')"
                ".classList.contains('jp-mod-replay')"
            )
            assert re.match(r"replaying \d\d:\d\d – \d\d:\d\d", state.text_content())
            space = page.locator(f"{PANEL} .jp-TrainWatch-chart").nth(2)
            assert int(space.get_attribute("data-points")) >= 3
            marks = page.locator(f"{PANEL} .jp-TrainWatch-marker")
            assert marks.count() >= 1
            levels = {m.get_attribute("data-level"): m.get_attribute("title") for m in marks.all()}
            titles = "\n".join(levels.values())
            if ending == "oom-kill":  # killed: the end is marked critical
                assert "critical" in levels, levels
            else:
                assert {"full-disk": "train_until_full", "kernel-killed": "kernel"}[
                    ending
                ] in titles
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
                set_theme(page, theme)
                page.wait_for_timeout(300)  # the charts re-read the theme on the next frame
                shot = artifact_path(f"panel-replay-{ending}-{theme.split()[-1].lower()}.png")
                page.screenshot(path=str(shot))
            set_theme(page, "JupyterLab Light")
            if ending == "full-disk":
                use_the_range_menu(page)
            # back to live: the live charts again, no marks
            page.locator(f"{PANEL} .jp-TrainWatch-backToLive").click()
            page.wait_for_function(
                f"() => document.querySelector('{PANEL}').dataset.range === 'live'"
            )
            assert page.locator(f"{PANEL} .jp-TrainWatch-marker").count() == 0
            # dismiss: the card goes
            gone = card.get_attribute("data-id")
            card.locator(".jp-TrainWatch-awayDismiss").click()
            assert page.locator(f"{CARD}[data-id='{gone}']").count() == 0
            if page.locator(CARD).count():  # other runs' cards: Dismiss all takes them all
                page.locator(f"{PANEL} .jp-TrainWatch-awayDismissAll").click()
            page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.away === '0'")
