"""``<base_url>/trainwatch-lab/metrics`` on a real Jupyter Server: the sample in Prometheus's
text format, Jupyter's authentication unless ``authenticate_prometheus`` is off, a sampler
that stays up from one scrape to the next (rates and fill trends on every scrape), and
Debian's Prometheus scraping it with a token while a scraper without one is refused."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from tornado.httpclient import HTTPClientError

from tests.prometheus.conftest import start_prometheus as start_prometheus  # fixture

from .conftest import GRACE

METRICS = ("trainwatch-lab", "metrics")
LEASE_S = 1.5  # a scrape holds the sampler this long here (more than GRACE, less than 15 s)
MIB = 1024 * 1024


@pytest.fixture
def jp_base_url() -> str:
    return "/jupyter/"  # a base URL Prometheus's metrics_path can say as it is


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.TrainWatch.scrape_lease_s = LEASE_S
    return jp_server_config


def series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith((name + "{", name + " "))]


async def scrape(jp_fetch, **kwargs) -> str:
    response = await jp_fetch(*METRICS, **kwargs)
    assert response.code == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return response.body.decode()


async def test_a_scrape_is_the_sample_in_the_text_format(jp_fetch, hub, jp_root_dir):
    text = await scrape(jp_fetch)
    assert series(text, "trainwatch_sample_timestamp_seconds")
    assert any(f'path="{jp_root_dir}"' in line for line in series(text, "trainwatch_path_info"))
    assert series(text, "node_filesystem_avail_bytes") and series(text, "node_disk_io_now")
    assert not series(text, "trainwatch_process_read_bytes_per_second")  # the server trains nothing
    assert "# HELP node_disk_io_time_seconds_total" in text
    response = await jp_fetch(
        *METRICS, headers={"Accept-Encoding": "gzip"}, decompress_response=False
    )
    assert response.headers["Content-Encoding"] == "gzip"


async def test_scrapes_need_jupyters_auth_unless_switched_off(jp_fetch, hub):
    for auth in ("", "token wrong-token"):
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*METRICS, headers={"Authorization": auth})
        assert info.value.code == 403
    assert hub.sampler is None  # nothing started for a stranger
    hub.config.authenticate_prometheus = False
    text = await scrape(jp_fetch, headers={"Authorization": ""})
    assert series(text, "trainwatch_sample_timestamp_seconds")


@pytest.mark.root
async def test_the_sampler_stays_up_between_scrapes_and_rates_are_there(jp_fetch, hub, tmpfs_mount):
    fs = tmpfs_mount("64m")
    hub.add_user_path(str(fs.path))
    stop = threading.Event()

    def fill() -> None:  # 4 MiB/s until 16 MiB are left: 12 s, a trend the advisor believes
        block = os.urandom(MIB)
        with open(fs.path / "checkpoint.pt", "wb") as fh:
            while not stop.wait(0.25) and os.statvfs(fs.path).f_bavail * 4096 > 16 * MIB:
                fh.write(block)
                fh.flush()

    writer = threading.Thread(target=fill, daemon=True)
    writer.start()
    try:
        first = await scrape(jp_fetch)
        sampler = hub.sampler
        stamps = [series(first, "trainwatch_sample_timestamp_seconds")]
        texts = []
        mount = f'mountpoint="{fs.path}"'
        fill = "trainwatch_filesystem_fill_rate_bytes_per_second"
        rates: list[list[str]] = []
        # scrapes further apart than the grace after a REST call, until the fill has lasted
        # long enough to be believed (5 s at least; bounded by the 12 s the writer runs)
        for _ in range(40):
            await asyncio.sleep(GRACE * 3)
            texts.append(await scrape(jp_fetch))
            stamps.append(series(texts[-1], "trainwatch_sample_timestamp_seconds"))
            rates.append([x for x in series(texts[-1], fill) if mount in x])
            if len(texts) >= 3 and rates[-1]:
                break
        assert hub.sampler is sampler and hub.starts == 1 and sampler.running
        assert len({s[0] for s in stamps}) == len(stamps)  # a new sample each time
        assert rates[-1], texts[-1]  # the fill rate needs a sampler that kept running
        assert float(rates[-1][0].rsplit(" ", 1)[1]) > MIB
    finally:
        stop.set()
        writer.join(5)
    # no scrape for longer than the lease: the sampler stops
    deadline = time.monotonic() + LEASE_S + GRACE + 5
    while hub.sampler is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert hub.sampler is None and not sampler.running


SCRAPE_JOBS = """\
  - job_name: jupyter
    metrics_path: {path}
    authorization:
      credentials: {token}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: stranger
    metrics_path: {path}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


async def until(predicate, timeout: float) -> bool:
    """Poll a (quick, blocking) check without blocking the server's loop in between."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.5)
    return True


@pytest.mark.parametrize("authenticate", [True, False])
async def test_prometheus_scrapes_the_server(
    jp_fetch,
    hub,
    jp_serverapp,
    jp_http_port,
    start_prometheus,
    authenticate,
):
    hub.config.authenticate_prometheus = authenticate
    token = jp_serverapp.identity_provider.token
    jobs = SCRAPE_JOBS.format(
        path="/jupyter/trainwatch-lab/metrics", token=token, port=jp_http_port
    )
    prometheus = start_prometheus(jobs)

    def scraped() -> bool:
        ups = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
        return ups == {"jupyter": "1", "stranger": "0" if authenticate else "1"}

    assert await until(scraped, timeout=30), prometheus.query("up")
    assert await until(
        lambda: prometheus.query('trainwatch_sample_timestamp_seconds{job="jupyter"}'), 10
    )
    assert prometheus.query('node_filesystem_avail_bytes{job="jupyter"}')
    if authenticate:  # the refused scrape is 403, and it started nothing by itself
        targets = prometheus.api("targets")["activeTargets"]
        stranger = next(t for t in targets if t["labels"]["job"] == "stranger")
        assert "403" in stranger["lastError"]
    # a scrape a second holds the sampler: one start however long Prometheus scrapes
    starts = hub.starts
    await asyncio.sleep(3)
    assert hub.starts == starts == 1 and hub.running
