"""The fleet endpoints against a real Jupyter Server and Debian's Prometheus scraping real
hosts: two ``trainwatch-lab serve`` agents (node-a on 127.0.0.1, node-b on 127.0.0.2), and a
host with only node_exporter and a DCGM exporter (127.0.0.3). Prometheus stopped, silent or
not Prometheus at all: one line and a 502 within the timeout; bad parameters: one line and
a 400; no URL: the listing says so."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import pytest
from tornado.httpclient import HTTPClientError

from tests.prometheus.conftest import (  # noqa: F401  (fixtures)
    Prometheus,
    fake_dcgm,
    free_port,
    node_exporter_on,
    serve,
    start_prometheus,
    wait_for,
)
from tests.prometheus.fleet_synthetic import victoria_scraping
from trainwatch_lab.server.fleet.promclient import shown

API = ("trainwatch-lab", "api")
TIMEOUT_S = 1.0
RANK = {"critical": 3, "warning": 2, "info": 1, None: 0}


def body(response) -> dict:
    return json.loads(response.body.decode())


async def fetch_error(jp_fetch, *parts, **kwargs) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*parts, **kwargs)
    response = info.value.response
    payload = json.loads(response.body.decode()) if response is not None and response.body else {}
    return info.value.code, payload


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[Prometheus]:
    """VictoriaMetrics scraping the file_sd targets, as Prometheus does."""
    store, close = victoria_scraping(tmp_path / "victoria-metrics")
    yield store
    close()


@pytest.fixture
def fleet_hosts(request, serve, node_exporter_on, fake_dcgm, tmp_path: Path):  # noqa: F811
    """Prometheus (VictoriaMetrics for ``prometheus_url`` "real-vm") scraping the three
    hosts, once it has two scrapes of each (rates)."""
    spec = getattr(request.node, "callspec", None)
    if spec is not None and spec.params.get("prometheus_url") == "real-vm":
        prometheus = request.getfixturevalue("victoria")
    else:
        prometheus = request.getfixturevalue("start_prometheus")()
    common = ("--file-sd", str(prometheus.sd_dir), "--interval", "0.5", "--gpu", "none")
    dirs = {}
    for name in ("a", "b"):
        dirs[name] = tmp_path / f"runs-{name}"
        dirs[name].mkdir()
    serve(str(dirs["a"]), *common, host="127.0.0.1", as_host="node-a")
    serve(str(dirs["b"]), *common, host="127.0.0.2", as_host="node-b")
    prometheus.add_target(node_exporter_on("127.0.0.3"))
    prometheus.add_target(fake_dcgm("127.0.0.3"))

    def ready() -> bool:
        up = prometheus.query("up == 1")
        # 20 s of scrapes of each disk: rates in Prometheus, and in VictoriaMetrics, whose
        # query_range aligns its points to the step (15 s for a 1 h chart): the newest point
        # lies up to a step back and needs two samples before it
        rated = prometheus.query(
            "count by (instance) (count_over_time(node_disk_io_time_seconds_total[1m]) >= 20)"
        )
        return len(up) == 4 and len(rated) == 3

    assert wait_for(ready, timeout=60), prometheus.query("up")
    return SimpleNamespace(prometheus=prometheus, dirs=dirs)


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections and never answers (a hung Prometheus)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def prometheus_url(request) -> str:
    kind = getattr(request, "param", "")
    if kind in ("real", "real-vm"):
        return request.getfixturevalue("fleet_hosts").prometheus.url
    if kind == "dead":
        return f"http://127.0.0.1:{free_port()}"
    if kind == "silent":
        return request.getfixturevalue("silent_url")
    if kind == "not-prometheus":
        return "http://" + request.getfixturevalue("fake_dcgm")("127.0.0.1")
    return kind


@pytest.fixture
def prometheus_timeout_s() -> float:
    """TIMEOUT_S, short for the tests that wait it out; one that waits for an answer takes a
    long one (parametrize it): the fleet's worker process starts and asks within it."""
    return TIMEOUT_S


@pytest.fixture
def jp_server_config(jp_server_config, prometheus_url, prometheus_timeout_s: float):
    jp_server_config.TrainWatch.prometheus_url = prometheus_url
    jp_server_config.TrainWatch.prometheus_timeout_s = prometheus_timeout_s
    return jp_server_config


@pytest.mark.parametrize(
    "prometheus_url", ["real", "real-vm"], indirect=True, ids=["prometheus", "victoriametrics"]
)
async def test_the_fleet_lists_every_host_with_what_it_exports(
    jp_fetch, hub, fleet_hosts, prometheus_url
):
    listing = body(await jp_fetch(*API, "fleet"))
    assert listing["prometheus"] == prometheus_url
    hosts = {h["host"]: h for h in listing["hosts"]}
    assert set(hosts) == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}, listing
    a, b, bare = hosts["127.0.0.1"], hosts["127.0.0.2"], hosts["127.0.0.3"]
    assert (a["name"], b["name"], bare["name"]) == ("node-a", "node-b", "127.0.0.3")
    for agent, runs in ((a, fleet_hosts.dirs["a"]), (b, fleet_hosts.dirs["b"])):
        assert agent["agent"] is True and agent["status"] == "up"
        assert time.time() - 5 < agent["last_seen"] <= time.time()  # its last scrape
        assert agent["disk"]["util_pct"] >= 0 and agent["disk"]["device"]
        assert agent["space"]["avail_bytes"] >= 0 and 0 <= agent["space"]["free_pct"] <= 100
        assert agent["gpu"] is None  # --gpu none
        assert str(runs).startswith(agent["space"]["mountpoint"])
    # node_exporter and DCGM exporter only: both instances, and the warnings their numbers
    # allow (a GPU holding 20 GB at 0 %)
    assert bare["agent"] is False and bare["status"] == "up"
    assert len(bare["instances"]) == 2
    assert bare["gpu"] == {"count": 1, "util_pct": 0.0}
    assert bare["disk"] is not None and bare["space"] is not None
    # (what else node_exporter finds on this machine, other tests' mounts, may warn too)
    codes = {w["code"] for w in bare["warnings"]}
    assert "gpu-stalled" in codes and bare["worst"] in ("warning", "critical")
    stalled = next(w for w in bare["warnings"] if w["code"] == "gpu-stalled")
    assert stalled["subject"] == "GPU 0" and stalled["message"]
    assert listing["fixes"]["gpu-stalled"].startswith("The GPU holds memory")
    ranks = [RANK[h["worst"]] for h in listing["hosts"]]
    assert ranks == sorted(ranks, reverse=True)  # the worst warning first

    # one host's charts over a window, on one time axis
    charts = body(await jp_fetch(*API, "fleet", "range", params={"host": "127.0.0.1"}))
    assert charts["host"] == "127.0.0.1" and charts["window_s"] == 3600
    t = charts["t"]
    assert len(t) > 100 and all(y - x == charts["step_s"] for x, y in pairwise(t))
    by_id = {c["id"]: c for c in charts["charts"]}
    assert set(by_id) == {"gpu", "disk_util", "disk_rate", "space"}
    for chart_id in ("disk_util", "disk_rate", "space"):
        series = by_id[chart_id]["series"]
        assert series and all(len(s["values"]) == len(t) for s in series), chart_id
        assert any(v is not None for s in series for v in s["values"]), chart_id
    assert by_id["gpu"]["series"] == []
    short = body(
        await jp_fetch(*API, "fleet", "range", params={"host": "127.0.0.3", "window": "300"})
    )
    gpu = next(c for c in short["charts"] if c["id"] == "gpu")
    assert [s["label"] for s in gpu["series"]] == ["GPU 0"]
    assert short["window_s"] == 300 and short["step_s"] == 2

    # Prometheus stops: one clear line, quickly, for the listing and the charts
    fleet_hosts.prometheus.stop()
    await asyncio.sleep(2.5)  # past the listing's short cache
    started = time.monotonic()
    code, payload = await fetch_error(jp_fetch, *API, "fleet")
    assert time.monotonic() - started < TIMEOUT_S + 1
    assert code == 502
    assert payload == {
        "error": f"Prometheus at {prometheus_url} is not reachable: Connection refused"
    }
    code, payload = await fetch_error(
        jp_fetch, *API, "fleet", "range", params={"host": "127.0.0.1"}
    )
    assert code == 502 and payload["error"].startswith(f"Prometheus at {prometheus_url} ")


@pytest.mark.parametrize("prometheus_url", ["silent"], indirect=True)
async def test_a_silent_prometheus_is_one_line_within_the_timeout_and_blocks_nothing(
    jp_fetch, hub, prometheus_url
):
    started = time.monotonic()
    fleet = asyncio.ensure_future(fetch_error(jp_fetch, *API, "fleet"))
    await asyncio.sleep(0.1)
    # the server keeps answering while the fleet waits on Prometheus
    paths = await jp_fetch(*API, "paths")
    assert paths.code == 200 and time.monotonic() - started < TIMEOUT_S
    code, payload = await fleet
    elapsed = time.monotonic() - started
    assert code == 502 and TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + 1
    assert payload == {
        "error": f"Prometheus at {prometheus_url} did not answer within {TIMEOUT_S:g} s"
    }


@pytest.mark.parametrize("prometheus_timeout_s", [60.0])  # under pytest-xdist 1 s was short
@pytest.mark.parametrize("prometheus_url", ["not-prometheus"], indirect=True)
async def test_a_url_that_is_not_prometheus_says_so(
    jp_fetch, hub, prometheus_url, prometheus_timeout_s
):
    code, payload = await fetch_error(jp_fetch, *API, "fleet")
    assert code == 502
    assert payload["error"] == (
        f"{prometheus_url} answered HTTP 200 but not as Prometheus's HTTP API "
        "(check c.TrainWatch.prometheus_url)"
    )


async def test_without_a_url_the_fleet_is_off(jp_fetch, hub):
    assert body(await jp_fetch(*API, "fleet")) == {
        "prometheus": None,
        "counts": {"critical": 0, "warning": 0, "down": 0, "ok": 0},
        "hosts": [],
    }
    code, payload = await fetch_error(jp_fetch, *API, "fleet", "range", params={"host": "n1"})
    assert code == 404
    assert payload == {"error": "no Prometheus is configured: set c.TrainWatch.prometheus_url"}


@pytest.mark.parametrize("prometheus_url", ["dead"], indirect=True)
@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({}, "missing parameter 'host'"),
        ({"host": "a b"}, "'host' must be a host name or address from GET fleet, got 'a b'"),
        ({"host": "n1", "window": "soon"}, "'window' must be a number, got 'soon'"),
        ({"host": "n1", "window": "5"}, "'window' must be between 60 and 604800, got '5'"),
        ({"host": "n1", "window": "nan"}, "'window' must be between 60 and 604800, got 'nan'"),
        ({"host": "n1", "step": "5"}, "unknown parameter 'step'"),
    ],
)
async def test_bad_parameters_are_one_line(jp_fetch, hub, prometheus_url, params, error):
    code, payload = await fetch_error(jp_fetch, *API, "fleet", "range", params=params)
    assert (code, payload) == (400, {"error": error})


@pytest.mark.parametrize("prometheus_url", ["dead"], indirect=True)
async def test_the_fleet_needs_jupyters_auth(jp_fetch, hub, prometheus_url):
    for parts in (("fleet",), ("fleet", "range")):
        code, _ = await fetch_error(
            jp_fetch, *API, *parts, params={"host": "n1"}, headers={"Authorization": ""}
        )
        assert code == 403


def test_a_password_in_the_url_is_never_shown() -> None:
    assert (
        shown("http://ops:s3cret@prom.example:9090/prom") == "http://ops:***@prom.example:9090/prom"
    )
    assert shown("https://prom.example") == "https://prom.example"
