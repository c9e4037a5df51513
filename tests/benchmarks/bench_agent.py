"""Row 7 agent: ``trainwatch-lab serve`` against Debian's node_exporter, side by side.

The agent samples at 1 s and is scraped every 1 s; node_exporter runs with only its diskstats
and filesystem collectors (what the agent's node_* series replace) and is scraped every 1 s
too, both as Prometheus scrapes (one kept-alive connection, its Accept headers, gzip). Both
are measured over the same window after a warm-up: CPU of the whole process tree (the
agent's mount-guard helpers included) from /proc, and the bytes of one scrape, before and
after compression. Target: the agent costs no more CPU than node_exporter.
"""

from __future__ import annotations

import gzip
import http.client
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from tests.benchmarks.common import (
    REPO,
    Config,
    Row,
    TreeCpu,
    free_port,
    guarded,
    judged,
    skipped,
)

GROUP = "7 agent"


# what Prometheus 2.x sends: OpenMetrics preferred, the text format accepted, gzip
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


class Scraper:
    """One kept-alive connection, scraping as Prometheus does; returns the bytes of one
    scrape before and after compression."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def __call__(self) -> tuple[int, int]:
        self.conn.request("GET", "/metrics", headers=PROMETHEUS_HEADERS)
        resp = self.conn.getresponse()
        wire = resp.read()
        plain = gzip.decompress(wire) if resp.getheader("Content-Encoding") == "gzip" else wire
        return len(plain), len(wire)

    def close(self) -> None:
        self.conn.close()


def _scrape(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return len(resp.read())


def _wait(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _scrape(url)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


def _measure(cfg: Config) -> list[Row]:
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        return [skipped(GROUP, "agent vs node_exporter", "prometheus-node-exporter missing")]
    seconds = 10.0 if cfg.quick else 60.0
    work = Path(tempfile.mkdtemp(prefix="twbench-agent-", dir="/var/tmp"))
    a_port, n_port = free_port(), free_port()
    agent = subprocess.Popen(
        [
            *(sys.executable, "-m", "trainwatch_lab", "serve", str(work), "--interval", "1"),
            *("--listen", f"127.0.0.1:{a_port}", "--gpu", "none"),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    node = subprocess.Popen(
        [
            *(exporter, "--collector.disable-defaults", "--collector.diskstats"),
            *("--collector.filesystem", f"--web.listen-address=127.0.0.1:{n_port}"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    urls = {
        key: f"http://127.0.0.1:{port}/metrics"
        for key, port in (("agent", a_port), ("node", n_port))
    }
    procs = {"agent": psutil.Process(agent.pid), "node": psutil.Process(node.pid)}
    try:
        for url in urls.values():
            _wait(url)
        time.sleep(5.0)  # warm-up: imports done, the first probe and ticks behind us
        scrapers = {"agent": Scraper(a_port), "node": Scraper(n_port)}
        meters = {k: TreeCpu(p.pid) for k, p in procs.items()}
        sizes: dict[str, list[tuple[int, int]]] = {k: [] for k in urls}
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            for key, scrape in scrapers.items():
                sizes[key].append(scrape())
            time.sleep(max(0.0, len(sizes["agent"]) - (time.monotonic() - start)))
        elapsed = time.monotonic() - start
        cpu = {k: meter.poll() / elapsed * 1000 for k, meter in meters.items()}
        for scrape in scrapers.values():
            scrape.close()
    finally:
        for p in (agent, node):
            p.terminate()
            p.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    scrapes = len(sizes["agent"])
    per = {k: sum(p for p, _ in v) / len(v) for k, v in sizes.items()}
    wire = {k: sum(w for _, w in v) / len(v) for k, v in sizes.items()}
    note = (
        f"{scrapes} scrapes each over {elapsed:.0f} s, kept-alive connections with "
        "Prometheus's headers; one watched path on /var/tmp"
    )
    verdict = judged(cpu["agent"] <= cpu["node"])
    agent_row = Row(
        GROUP,
        "agent CPU (sampling at 1 s + a scrape a second)",
        f"{cpu['agent']:.1f} ms/s",
        f"<= node_exporter ({cpu['node']:.1f} ms/s)",
        verdict,
        note,
        data={"cpu_ms_per_s": cpu, "scrapes": scrapes},
    )
    node_row = Row(
        GROUP,
        "node_exporter CPU (diskstats + filesystem, a scrape a second)",
        f"{cpu['node']:.1f} ms/s",
        note="Debian's prometheus-node-exporter",
    )
    bytes_row = Row(
        GROUP,
        "bytes per scrape, agent / node_exporter",
        f"{per['agent']:.0f} B / {per['node']:.0f} B",
        note=(
            f"gzipped on the wire: {wire['agent']:.0f} B / {wire['node']:.0f} B; node_exporter "
            "sends every disk and filesystem of the machine, the agent those under the "
            "watched paths plus trainwatch_* series"
        ),
        data={"bytes": per, "wire_bytes": wire},
    )
    return [agent_row, node_row, bytes_row]


def run(cfg: Config) -> list[Row]:
    return guarded(GROUP, "agent vs node_exporter", lambda: _measure(cfg))
