"""``%trainwatch --since 1h`` in JupyterLab in Chromium: the replay of a recorded night (a
run filling /data until it died, its warnings and checkpoints) drawn with its ending above
the charts and its events as markers, light and dark; screenshots in .test-artifacts/."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import (
    LabServer,
    artifact_path,
    chromium_page,
    jupyter_lab,
    open_notebook,
    run_cell,
    set_theme,
    write_notebook,
)
from trainwatch_lab.core.record import Event, Store

from ..kernel import REPO

pytestmark = pytest.mark.browser


def record_a_night(path: Path, end: float) -> None:
    """50 minutes at 10 s: a run writes 30 MB/s with the GPU busy until /data is full, then
    dies; warnings, checkpoints every 10 minutes and its end are the events."""
    store = Store(str(path), role="t")
    store.register()
    died = end - 300
    ts = [end - 3000 + 10 * i for i in range(301)]
    alive = [t < died for t in ts]
    total = 8e9
    avail = [max(0.0, 3e9 - 1.2e6 * (t - ts[0])) for t in ts]  # full at -8 min
    store.close_blocks(
        {
            "path:/data:avail_bytes": (ts, avail),
            "path:/data:free_bytes": (ts, avail),
            "path:/data:total_bytes": (ts, [total] * len(ts)),
            "disk:sdb:wmb_s": (ts, [30.0 + 5 * (i % 3) if a else 0.0 for i, a in enumerate(alive)]),
            "disk:sdb:rmb_s": (ts, [4.0 if a else 0.0 for a in alive]),
            "gpu:0:util_pct": (ts, [88.0 + (i % 5) if a else 0.0 for i, a in enumerate(alive)]),
            "gpu:0:mem_used_bytes": (ts, [30e9 if a else 0.0 for a in alive]),
            "gpu:0:mem_total_bytes": (ts, [80e9] * len(ts)),
        }
    )
    warn = {"code": "disk-filling", "severity": "warning", "subject": "/data"}
    full = {"code": "disk-almost-full", "severity": "critical", "subject": "/data"}
    events = [
        Event(died - 1500, "warning-raised", "/data", "disk-filling: /data full in 25 min", warn),
        Event(died - 500, "warning-raised", "/data", "disk-almost-full: /data 4 % free", full),
        *(
            Event(died - k * 600, "checkpoint", "/data", f"checkpoint saved: step-{5 - k}.pt", {})
            for k in (4, 3, 2, 1)
        ),
        Event(
            died,
            "process-ended",
            "train.py",
            "train.py (pid 4242) ended",
            {
                "pid": 4242,
                "started": died - 5 * 3600 - 600,
                "paths": ["/data"],
                "stderr_tail": ["OSError: [Errno 28] No space left on device"],
            },
        ),
    ]
    store.add_events(events)
    store.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    root = tmp_path_factory.mktemp("lab-root")
    store = root.parent / "history.sqlite"
    record_a_night(store, time.time() - 60)
    env = {
        "PYTHONPATH": str(REPO),
        "TRAINWATCH_LAB_STATE_DIR": str(root.parent / "lab-state"),
        "TRAINWATCH_STORE": str(store),  # the kernels' (and the server's) history
    }
    with jupyter_lab(root, env=env) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: LabServer) -> Iterator[Any]:
    with chromium_page() as p:
        yield p


def test_the_replay_draws_the_ending_charts_and_markers(lab: LabServer, page: Any) -> None:
    write_notebook(
        lab.root_dir / "replay.ipynb", ["%load_ext trainwatch_lab\n%trainwatch --since 1h"]
    )
    open_notebook(page, lab, "replay.ipynb")
    cell = run_cell(page, 0)
    replay = cell.locator(".tw-replay")
    replay.locator(".tw-chart-space path.line").first.wait_for(timeout=60_000)
    ending = replay.locator(".tw-ending").inner_text()
    assert ending.startswith("train.py ended at ") and "/data was full (0 B free" in ending
    assert "disk-filling warned at" in ending and "Errno 28" in ending
    for name in ("gpu", "io", "space"):
        chart = replay.locator(f".tw-chart-{name}")
        assert chart.locator("path.line").count() >= 1, name
        # the events in the window: 2 warnings, 4 checkpoints and the end, one marker each
        assert chart.locator("path.dot").count() == 7, name
    assert "Events (7)" in replay.locator(".tw-events summary").inner_text()
    cell.scroll_into_view_if_needed()
    light_marker = replay.locator(".tw-chart-space path.dot").first.evaluate(
        "(el) => getComputedStyle(el).fill"
    )
    light_end = replay.locator(".tw-chart-space path.dot").last.evaluate(
        "(el) => getComputedStyle(el).fill"
    )
    # the marker's tooltip says what happened and when
    replay.locator(".tw-chart-space path.dot").last.hover()
    page.wait_for_function(
        """() => [...document.querySelectorAll('.bqplot_mark_tooltip')]
            .some(d => d.textContent.includes('train.py (pid 4242) ended'))""",
        timeout=10_000,
    )
    cell.screenshot(path=str(artifact_path("notebook-replay-light.png")))
    set_theme(page, "JupyterLab Dark")
    try:
        dark_marker = replay.locator(".tw-chart-space path.dot").first.evaluate(
            "(el) => getComputedStyle(el).fill"
        )
        cell.screenshot(path=str(artifact_path("notebook-replay-dark.png")))
    finally:
        set_theme(page, "JupyterLab Light")
    assert light_marker != dark_marker  # a theme variable, not a fixed colour
    assert light_end != light_marker  # the run's end stands out from the other events
