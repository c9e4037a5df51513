"""A synthetic cluster for the fleet's scale tests and benchmark: N hosts, each with
node_exporter (4 disks, 4 filesystems) and DCGM exporter (8 GPUs), one in ten with our agent,
written as OpenMetrics and backfilled into a real Prometheus (``promtool tsdb
create-blocks-from openmetrics``) or imported into VictoriaMetrics (its
``/api/v1/import/prometheus``). Samples run from a few minutes before now to well after, so
rates and ``up`` answer "now" for as long as a test runs.

Which hosts warn is a function of the host's number (``expected``), so a test knows what the
listing must say without reading it from the answer.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.prometheus.conftest import Prometheus, _answers, free_port, stop
from tests.support.env import need_tool
from tests.support.mounts import wait_until
from trainwatch_lab.prometheus.rules.ruleset import rules_yaml

DISKS = ("nvme0n1", "nvme1n1", "sda", "sdb")
MOUNTS = ("/", "/data", "/scratch", "/home")
GPUS = 8
GIB = 1024**3
STEP_S = 30
BEFORE_S = 300  # history before now
AFTER_S = 1800  # and "future" samples, so that now keeps its rates while tests run
GONE_BEFORE_S = 600  # a gone host's last sample


def name(i: int) -> str:
    return f"gpu{i:05d}"


@dataclass(frozen=True)
class Host:
    """What host ``i`` exports and what its row must say."""

    i: int

    @property
    def critical(self) -> bool:  # /scratch at 0.5 % free
        return self.i % 97 == 3

    @property
    def full(self) -> bool:  # /data at 5 % free
        return self.i % 13 == 5

    @property
    def stalled(self) -> bool:  # GPU 2 holds memory at 0 %
        return self.i % 31 == 7

    @property
    def down(self) -> bool:  # every exporter answers up == 0
        return self.i % 211 == 11

    @property
    def gone(self) -> bool:  # no sample since GONE_BEFORE_S
        return self.i % 331 == 13

    @property
    def agent(self) -> bool:  # runs our agent (its warnings, none derived)
        return self.i % 10 == 0 and not (self.critical or self.full or self.stalled)

    def state(self) -> str:
        if self.down or self.gone:
            return "down"
        if self.critical:
            return "critical"
        return "warning" if self.full or self.stalled else "ok"


def expected(n: int) -> dict[str, int]:
    out = {"critical": 0, "warning": 0, "down": 0, "ok": 0}
    for i in range(n):
        out[Host(i).state()] += 1
    return out


def _series(h: Host) -> Iterator[tuple[str, str, float, float]]:
    """(metric, labels, value at now, rate per second) of every series of one host."""
    node = f'instance="{name(h.i)}:9100",job="node"'
    dcgm = f'instance="{name(h.i)}:9400",job="dcgm"'
    up = 0.0 if h.down else 1.0
    yield "up", node, up, 0
    yield "up", dcgm, up, 0
    if h.agent:
        agent = f'instance="{name(h.i)}:10917",job="trainwatch",hostname="{name(h.i)}.cluster"'
        yield "up", agent, up, 0
        yield "trainwatch_sample_timestamp_seconds", agent, 0, 1
    busy = (h.i % 7) / 10  # the busiest disk: 0 .. 60 %
    for k, disk in enumerate(DISKS):
        labels = f'{node},device="{disk}"'
        util = busy if k == 0 else 0.01 * k
        yield "node_disk_io_time_seconds_total", labels, 1e5, util
        yield "node_disk_read_bytes_total", labels, 1e12, 2e7 * util
        yield "node_disk_written_bytes_total", labels, 1e12, 1e7 * util
        yield "node_disk_read_time_seconds_total", labels, 1e4, 0.001 * util * 100
        yield "node_disk_reads_completed_total", labels, 1e8, util * 100
        yield "node_disk_write_time_seconds_total", labels, 1e4, 0.001 * util * 100
        yield "node_disk_writes_completed_total", labels, 1e8, util * 100
    for k, mount in enumerate(MOUNTS):
        labels = f'{node},device="/dev/md{k}",mountpoint="{mount}",fstype="ext4"'
        size = 1000.0 * GIB
        free = 0.005 if mount == "/scratch" and h.critical else 0.4
        free = 0.05 if mount == "/data" and h.full else free
        yield "node_filesystem_size_bytes", labels, size, 0
        yield "node_filesystem_avail_bytes", labels, size * free, 0
        yield "node_filesystem_readonly", labels, 0, 0
    for g in range(GPUS):
        labels = f'{dcgm},gpu="{g}",UUID="GPU-{h.i:05d}-{g}",modelName="NVIDIA H100"'
        util = 0.0 if (h.stalled and g == 2) else 50.0 + 5 * g
        yield "DCGM_FI_DEV_GPU_UTIL", labels, util, 0
        yield "DCGM_FI_DEV_FB_USED", labels, 20000.0, 0


def lines(n: int, now: float, ms: bool = False, after_s: int = AFTER_S) -> Iterator[str]:
    """The cluster as exposition text, family by family (OpenMetrics wants them whole):
    timestamps in seconds, or milliseconds for VictoriaMetrics (``ms``); samples until
    ``after_s`` past now."""
    hosts = [Host(i) for i in range(n)]
    by_metric: dict[str, list[tuple[Host, str, float, float]]] = {}
    for h in hosts:
        if h.down:  # a host down exports nothing but its exporters' up == 0
            by_metric.setdefault("up", []).extend(
                (h, labels, 0.0, 0.0) for metric, labels, _, _ in _series(h) if metric == "up"
            )
            continue
        for metric, labels, value, rate in _series(h):
            by_metric.setdefault(metric, []).append((h, labels, value, rate))
    t0 = int(now)
    times = range(t0 - BEFORE_S, t0 + after_s, STEP_S)
    gone = range(t0 - 2 * GONE_BEFORE_S, t0 - GONE_BEFORE_S, STEP_S)
    for metric, series in by_metric.items():
        yield f"# TYPE {metric} unknown"
        for h, labels, value, rate in series:
            for t in gone if h.gone else times:
                ticking = metric == "trainwatch_sample_timestamp_seconds"
                v = t if ticking else value + rate * (t - now)
                stamp = t * 1000 if ms else t
                yield f"{metric}{{{labels}}} {float(v)!r} {stamp}"


def write_openmetrics(path: Path, n: int, after_s: int = AFTER_S) -> None:
    with path.open("w") as fh:
        for line in lines(n, time.time(), after_s=after_s):
            fh.write(line + "\n")
        fh.write("# EOF\n")


def backfill(n: int, data_dir: Path, work: Path, after_s: int = AFTER_S) -> None:
    """N hosts as TSDB blocks in ``data_dir`` (a Prometheus's --storage.tsdb.path, before
    it starts)."""
    promtool = need_tool("promtool")
    source = work / "fleet.om"
    write_openmetrics(source, n, after_s)
    data_dir.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
    )
    source.unlink()
    assert out.returncode == 0, out.stderr[-2000:]


def synthetic_prometheus(
    home: Path, n: int, after_s: int = AFTER_S, rules: bool = False
) -> tuple[Store, Callable[[], None]]:
    """Debian's Prometheus over N backfilled hosts (nothing scraped: the answers are the
    cluster's alone), and how to stop it. ``rules``: with the rules of ``trainwatch-lab
    rules`` (the fleet's recording rules among them), evaluated every 15 s, and ready once
    the per-host series are recorded."""
    home.mkdir(parents=True, exist_ok=True)
    backfill(n, home / "data", home, after_s)
    return serve_backfilled(home, n, rules)


def serve_backfilled(home: Path, n: int, rules: bool = False) -> tuple[Store, Callable[[], None]]:
    """Debian's Prometheus over what ``backfill`` wrote into ``home / "data"``."""
    binary = need_tool("prometheus")
    config = "global: {}\n"
    if rules:
        (home / "rules.yml").write_text(rules_yaml(rate_window="1m"))
        config = (
            f"global:\n  evaluation_interval: 15s\nrule_files: [{home / 'rules.yml'}]\n"
            # the backfilled blocks reach past now: what the rules record now is older
            "storage:\n  tsdb:\n    out_of_order_time_window: 2h\n"
        )
    (home / "prometheus.yml").write_text(config)
    port = free_port()
    log = (home / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    store, close = _ready(Store(f"http://127.0.0.1:{port}", proc), log, "/-/ready")
    if rules and not wait_until(lambda: _recorded(store.url, n), timeout=120):
        close()
        raise AssertionError("the fleet's recording rules recorded nothing")
    return store, close


def _recorded(url: str, n: int) -> bool:
    """Whether the per-host series are recorded for (nearly) every host."""
    query = urllib.parse.urlencode(
        {"query": "count(trainwatch:host_fs:node_filesystem_free:ratio)"}
    )
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) >= 0.9 * n * len(MOUNTS)


def _ready(store: Store, log: Any, path: str) -> tuple[Store, Callable[[], None]]:
    def close() -> None:
        stop(store.proc)
        log.close()

    if not wait_until(lambda: _answers(store.url + path), timeout=60):
        close()
        raise AssertionError(Path(log.name).read_text()[-2000:])
    return store, close


@dataclass
class Store:
    """A running Prometheus-compatible store: its base URL for c.TrainWatch.prometheus_url."""

    url: str
    proc: subprocess.Popen[bytes]


def synthetic_victoria(
    home: Path, n: int, after_s: int = AFTER_S
) -> tuple[Store, Callable[[], None]]:
    """Debian's VictoriaMetrics (single node) over the same N hosts, imported through its
    Prometheus text import: a stand-in for the long-term stores clusters put behind
    Prometheus. ``-search.latencyOffset=0s``: the newest samples answer at once."""
    binary = need_tool("victoria-metrics")
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (home / "victoria-metrics.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"-storageDataPath={home / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=100y",
            "-search.latencyOffset=0s",
            "-search.disableCache",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    store, close = _ready(Store(f"http://127.0.0.1:{port}", proc), log, "/health")
    try:
        batch: list[str] = []
        for line in lines(n, time.time(), ms=True, after_s=after_s):
            if not line.startswith("#"):
                batch.append(line)
            if len(batch) >= 200_000:
                _import(store.url, batch)
        _import(store.url, batch)
        urllib.request.urlopen(f"{store.url}/internal/force_flush", timeout=30).close()
    except BaseException:
        close()
        raise
    return store, close


def _import(url: str, batch: list[str]) -> None:
    body = ("\n".join(batch) + "\n").encode()
    batch.clear()
    request = urllib.request.Request(f"{url}/api/v1/import/prometheus", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 204, response.read()[:500]


def synthetic_store(
    backend: str, home: Path, n: int, after_s: int = AFTER_S
) -> tuple[Store, Callable[[], None]]:
    """By name: ``prometheus``, ``prometheus-rules`` (our recording rules loaded: the listing
    reads the per-host series they record) or ``victoriametrics``."""
    if backend == "victoriametrics":
        return synthetic_victoria(home, n, after_s)
    return synthetic_prometheus(home, n, after_s, rules=backend == "prometheus-rules")


VM_SCRAPE = """\
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: trainwatch
    file_sd_configs:
      - files: ["{sd}/*.json"]
"""


def victoria_scraping(home: Path) -> tuple[Prometheus, Callable[[], None]]:
    """Debian's VictoriaMetrics scraping every file_sd target written into ``.sd_dir`` each
    second, as the ``prometheus`` fixture's Prometheus does (no rules: a long-term store
    evaluates none), behind the same small API wrapper."""
    binary = need_tool("victoria-metrics")
    sd = home / "sd"
    sd.mkdir(parents=True)
    (home / "scrape.yml").write_text(VM_SCRAPE.format(sd=sd))
    port = free_port()
    log = (home / "victoria-metrics.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"-storageDataPath={home / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-promscrape.config={home / 'scrape.yml'}",
            "-promscrape.fileSDCheckInterval=1s",
            "-search.latencyOffset=0s",
            "-search.disableCache",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _, close = _ready(Store(f"http://127.0.0.1:{port}", proc), log, "/health")
    return Prometheus(proc, port, sd), close
