"""The Fleet section in a real JupyterLab and a real Chromium, fed by Debian's Prometheus
scraping two ``trainwatch-lab serve`` agents as two hosts (and a DCGM exporter alone on a
third): a row per host, a click draws that host's charts from ``query_range``, Prometheus
stopped is one clear line in the section; without a Prometheus URL the section is hidden
(as is the Training processes section while none is found)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.prometheus.conftest import fake_dcgm as fake_dcgm  # fixtures
from tests.prometheus.conftest import serve as serve
from tests.prometheus.conftest import start_prometheus as start_prometheus
from tests.prometheus.conftest import wait_for
from tests.prometheus.fleet_synthetic import Host, expected, synthetic_prometheus
from tests.prometheus.fleet_synthetic import name as host_name
from tests.server.test_browser import PANEL, lab_setup, widen_sidebar
from tests.support.lab import artifact_path, chromium_page, jupyter_lab, set_theme

pytestmark = [pytest.mark.browser]

FLEET = "#trainwatch-lab-fleet"
ROWS = f"{FLEET} .jp-TrainWatch-fleetRow"
OPEN = "() => window.jupyterapp.commands.execute('trainwatch-lab:open')"
REFRESH = "() => window.trainwatchLab.panel.fleet.refresh()"
SHOWN_S = 75  # data in the charts of the screenshot, seconds
FLEET_PAGE = 50  # rows drawn at a time (js/src/fleet/view.ts)


def test_the_fleet_lists_both_hosts_draws_one_and_says_when_prometheus_stops(
    tmp_path: Path, start_prometheus, serve, fake_dcgm
) -> None:
    prometheus = start_prometheus()
    began = time.monotonic()
    common = ("--file-sd", str(prometheus.sd_dir), "--interval", "0.5", "--gpu", "none")
    for name, host in (("a", "127.0.0.1"), ("b", "127.0.0.2")):
        runs = tmp_path / f"runs-{name}"
        runs.mkdir()
        serve(str(runs), *common, host=host, as_host=f"node-{name}")
    prometheus.add_target(fake_dcgm("127.0.0.3"), hostname="node-c")
    rated = "count by (instance) (rate(node_disk_io_time_seconds_total[1m]))"
    assert wait_for(lambda: len(prometheus.query(rated)) == 2, timeout=60)

    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    args.append(f"--TrainWatch.prometheus_url={prometheus.url}")
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1400, 1000)) as page:
        page.goto(lab.url("lab"))
        page.wait_for_function("() => !!window.trainwatchLab", timeout=90_000)
        page.evaluate(OPEN)
        page.locator(PANEL).wait_for(state="visible", timeout=30_000)
        widen_sidebar(page, 420)
        page.locator(FLEET).wait_for(state="visible", timeout=30_000)
        page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === 3")
        hosts = page.eval_on_selector_all(ROWS, "rows => rows.map(r => r.dataset.host)")
        assert set(hosts) == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}
        assert hosts[0] == "127.0.0.3"  # the host with a warning (a GPU idle with memory) first
        texts = {h: page.locator(f"{ROWS}[data-host='{h}']").inner_text() for h in hosts}
        assert "node-a" in texts["127.0.0.1"] and "node-b" in texts["127.0.0.2"]
        assert "busy" in texts["127.0.0.1"] and "free on" in texts["127.0.0.1"]
        assert "GPU 0 %" in texts["127.0.0.3"] and "holds memory" in texts["127.0.0.3"]

        # a click on node-a: its charts over the chosen window, from query_range
        page.click(f"{ROWS}[data-host='127.0.0.1']")
        detail = f"{FLEET} .jp-TrainWatch-fleetDetail"
        page.wait_for_function(
            f"""() => {{
                const d = document.querySelector('{detail}');
                if (!d || d.dataset.host !== '127.0.0.1') return false;
                const charts = [...d.querySelectorAll('.jp-TrainWatch-chart')];
                return charts.length === 4 && charts.filter(c => Number(c.dataset.series) > 0
                    && c.querySelector('.u-over')).length >= 3;
            }}""",
            timeout=30_000,
        )
        title = page.locator(f"{detail} .jp-TrainWatch-fleetDetailTitle").inner_text()
        assert title == "node-a · last 1 h"
        assert page.get_attribute(f"{ROWS}[data-host='127.0.0.1']", "aria-expanded") == "true"
        page.select_option(f"{FLEET} .jp-TrainWatch-fleetWindow", "300")
        page.wait_for_function(
            f"() => document.querySelector('{detail} .jp-TrainWatch-fleetDetailTitle')"
            ".textContent === 'node-a · last 5 min'"
        )
        # the picture: a minute of the agents' data in the window (and the charts redrawn)
        time.sleep(max(0.0, SHOWN_S - (time.monotonic() - began)))
        page.evaluate(REFRESH)
        page.wait_for_timeout(1_500)
        page.locator(FLEET).scroll_into_view_if_needed()
        page.locator(FLEET).screenshot(path=str(artifact_path("lab-panel-fleet.png")))

        # a row reached with the keyboard keeps the focus through a refresh (it was rebuilt)
        page.focus(f"{ROWS}[data-host='127.0.0.2']")
        page.eval_on_selector(f"{ROWS}[data-host='127.0.0.2']", "row => { row.twHeld = true; }")
        page.evaluate(  # a refresh of its own, not one in flight that answered before the mark
            """async () => {
                const fleet = window.trainwatchLab.panel.fleet;
                while (fleet._loading) await new Promise(r => setTimeout(r, 50));
                await fleet.refresh();
            }"""
        )
        held = page.evaluate(
            "() => ({host: document.activeElement.dataset.host,"
            " same: document.activeElement.twHeld === true})"
        )
        assert held == {"host": "127.0.0.2", "same": True}, held

        # Prometheus stops: the server's one line, in the section, quickly
        prometheus.stop()
        page.wait_for_timeout(2_500)  # past the server's short cache of the listing
        page.evaluate(REFRESH)
        error = page.locator(f"{FLEET} .jp-TrainWatch-fleetError")
        page.wait_for_function(
            f"() => document.querySelector('{FLEET}').dataset.error === 'true'", timeout=10_000
        )
        text = error.inner_text()
        assert text == f"Prometheus at {prometheus.url} is not reachable: Connection refused"
        # the last answer stays, faded, and says when it was
        assert "jp-mod-stale" in page.get_attribute(FLEET, "class")
        assert "last answer at" in page.locator(f"{FLEET} .jp-TrainWatch-fleetStatus").inner_text()
        page.locator(FLEET).screenshot(path=str(artifact_path("lab-panel-fleet-down.png")))


def test_without_a_prometheus_url_there_is_no_fleet_section(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page() as page:
        page.goto(lab.url("lab"))
        page.wait_for_function(
            "() => window.trainwatchLab && window.trainwatchLab.stream.stats.messages > 0",
            timeout=90_000,
        )
        page.evaluate(OPEN)
        page.locator(PANEL).wait_for(state="visible", timeout=30_000)
        page.evaluate(REFRESH)
        page.wait_for_timeout(1_000)
        assert page.locator(FLEET).is_hidden()
        # no training process found (discovery is off here): no such section either
        assert page.locator(f"{PANEL} .jp-TrainWatch-processes").is_hidden()
        assert page.evaluate("() => window.trainwatchLab.panel.fleet.hosts.length") == 0


def test_a_thousand_hosts_counts_filter_a_page_of_rows_and_one_hosts_charts(
    tmp_path: Path,
) -> None:
    """Debian's Prometheus holding a backfilled cluster of 1000 hosts (node_exporter with 4
    disks and 4 filesystems, DCGM exporter with 8 GPUs each): the hosts per state at the top,
    a page of rows (the worst first) however many hosts, the filter box by warning code and
    host name, one host's charts on demand; screenshots in both themes."""
    n = 1000
    prometheus, close = synthetic_prometheus(tmp_path / "cluster", n)
    root = tmp_path / "root"
    root.mkdir()
    args, env = lab_setup(tmp_path)
    args += [
        f"--TrainWatch.prometheus_url={prometheus.url}",
        "--TrainWatch.prometheus_timeout_s=30",
    ]
    try:
        with jupyter_lab(root, extra_args=args, env=env) as lab, chromium_page((1440, 900)) as page:
            page.goto(lab.url("lab"))
            page.wait_for_function("() => !!window.trainwatchLab", timeout=90_000)
            page.evaluate(OPEN)
            page.locator(PANEL).wait_for(state="visible", timeout=30_000)
            widen_sidebar(page, 460)
            page.locator(FLEET).wait_for(state="visible", timeout=60_000)
            page.wait_for_function(
                f"() => document.querySelectorAll('{ROWS}').length > 0", timeout=60_000
            )
            assert page.evaluate("() => window.trainwatchLab.panel.fleet.hosts.length") == n
            # a page of rows, not a thousand
            assert page.locator(ROWS).count() == FLEET_PAGE
            counts = expected(n)
            text = page.get_attribute(f"{FLEET} .jp-TrainWatch-fleetCounts", "data-text")
            assert text == (
                f"{counts['critical']} critical, {counts['warning']} warning, "
                f"{counts['ok']} ok, {counts['down']} down"
            )
            states = page.eval_on_selector_all(ROWS, "rows => rows.map(r => r.dataset.state)")
            assert states[: counts["critical"]] == ["critical"] * counts["critical"]
            assert states[counts["critical"]] == "warning"  # the worst first

            # the filter box: a warning code, then a host name
            stalled = sum(1 for i in range(n) if Host(i).stalled and Host(i).state() != "down")
            page.fill(f"{FLEET} .jp-TrainWatch-fleetFilter", "gpu-stalled")
            page.wait_for_function(
                f"() => document.querySelectorAll('{ROWS}').length === {stalled}"
            )
            page.fill(f"{FLEET} .jp-TrainWatch-fleetFilter", host_name(3))
            page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === 1")

            # one host's charts, on demand
            page.click(f"{ROWS}[data-host='{host_name(3)}']")
            detail = f"{FLEET} .jp-TrainWatch-fleetDetail"
            page.wait_for_function(
                f"""() => {{
                    const d = document.querySelector('{detail}');
                    if (!d || d.dataset.host !== '{host_name(3)}') return false;
                    return [...d.querySelectorAll('.jp-TrainWatch-chart')].filter(
                        c => Number(c.dataset.series) > 0 && c.querySelector('.u-over')
                    ).length === 4;
                }}""",
                timeout=60_000,
            )
            # every host again: the first page, and the next on demand
            page.fill(f"{FLEET} .jp-TrainWatch-fleetFilter", "")
            page.wait_for_function(
                f"() => document.querySelectorAll('{ROWS}').length === {FLEET_PAGE}"
            )
            page.click(f"{FLEET} .jp-TrainWatch-fleetMore")
            page.wait_for_function(
                f"() => document.querySelectorAll('{ROWS}').length === {2 * FLEET_PAGE}"
            )
            # the picture: the counts, the filter and the worst rows (the charts closed again)
            page.click(f"{ROWS}[data-host='{host_name(3)}']")
            page.locator(detail).wait_for(state="hidden")
            page.mouse.move(0, 0)  # no row under the pointer
            page.locator(FLEET).evaluate("n => n.scrollIntoView()")
            page.screenshot(path=str(artifact_path("fleet-1000-light.png")))
            set_theme(page, "JupyterLab Dark")
            page.evaluate(REFRESH)
            page.wait_for_timeout(1_500)
            page.locator(FLEET).evaluate("n => n.scrollIntoView()")
            page.screenshot(path=str(artifact_path("fleet-1000-dark.png")))
    finally:
        close()
