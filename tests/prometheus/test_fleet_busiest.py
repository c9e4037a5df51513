"""With our recording rules loaded, Prometheus sends the throughput of each host's busiest
disks only (``disk_bytes``), not every disk's: the listing is the same as from every disk's
(the fold picks the busiest's), hosts whose disks tie included (every disk idle: topk picks
any of them). Debian's Prometheus holding a backfilled synthetic cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.prometheus.fleet_synthetic import DISKS, Host, synthetic_store
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.prometheus.fleet import instant_queries
from trainwatch_lab.prometheus.rules_fleet import recording_rules
from trainwatch_lab.server.fleet_listing import listing
from trainwatch_lab.server.promclient import result
from trainwatch_lab.server.promfetch import Endpoint, query_all

HOSTS = 40
WINDOW = "1m"


@pytest.fixture(scope="module")
def recorded_url(tmp_path_factory) -> Iterator[str]:
    store, close = synthetic_store("prometheus-rules", tmp_path_factory.mktemp("cluster"), HOSTS)
    yield store.url
    close()


def test_the_busiest_disks_throughput_alone_lists_the_same(recorded_url: str) -> None:
    names = [record for record, _ in recording_rules(WINDOW)]
    queries = instant_queries(WINDOW, recorded=names)
    every_disk = queries | {"disk_bytes": f"trainwatch:host_device:node_disk_bytes:rate{WINDOW}"}
    assert queries["disk_bytes"] != every_disk["disk_bytes"]
    where, at = Endpoint(recorded_url, 30.0), time.time()

    def hosts(asked: dict[str, str]) -> list[dict]:
        return json.loads(listing(where, asked, at, time.monotonic() + 30, True, DEFAULTS))["hosts"]

    assert hosts(queries) == hosts(every_disk)

    # what Prometheus sent: one disk per host, all four of a host whose disks are all idle
    sent = result(query_all(where, {"b": queries["disk_bytes"]}, at, time.monotonic() + 30)["b"])
    per_host: dict[str, list[str]] = {}
    for item in sent:
        per_host.setdefault(item["metric"]["host"], []).append(item["metric"]["device"])
    idle = [h for h in range(HOSTS) if Host(h).idle and not (Host(h).down or Host(h).gone)]
    assert idle  # the cluster has such hosts
    for host, devices in per_host.items():
        i = int(host.removeprefix("gpu"))
        assert sorted(devices) == (sorted(DISKS) if i in idle else [devices[0]]), host
    assert len(sent) < 2 * len(per_host)  # a quarter of every disk's, give or take the idle
