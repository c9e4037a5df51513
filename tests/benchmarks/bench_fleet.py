"""Row 13: the fleet at cluster size (issue 26). For N synthetic hosts (node_exporter with 4
disks and 4 filesystems, DCGM exporter with 8 GPUs, one in ten with our agent) backfilled into
Debian's Prometheus (tests/prometheus/fleet_synthetic), a real Jupyter server with the
extension and ``c.TrainWatch.prometheus_url`` set:

- the listing end to end: ``GET /trainwatch-lab/api/fleet`` wall time (median of 3, each past
  the server's 2 s cache) and the reply's size;
- Prometheus's own time for the listing's queries, sent at once as the server sends them;
- the server's CPU for one listing (its process clock) and its peak RSS during it
  (``VmHWM`` after ``clear_refs`` 5), above its RSS before; the same of its listing worker
  process (server.fleet.listing), which asks Prometheus, decodes, folds and encodes;
- the longest event-loop stall a client sees: Jupyter's ``/api/status`` asked back to back
  during a listing, its longest answer.

    python -m tests.benchmarks.run --only fleet          # N = 100, 1000, 10000
    TWBENCH_FLEET_SIZES=100,1000 python -m tests.benchmarks.run --only fleet
    TWBENCH_FLEET_SIZES=10000 TWBENCH_FLEET_MODES=recorded TWBENCH_FLEET_LISTINGS=1 ...
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainwatch_lab.prometheus.fleet import instant_queries
from trainwatch_lab.prometheus.rules.fleet import host_series

from .common import (
    Config,
    Row,
    Server,
    _process_cpu_ns,
    fmt_bytes,
    guarded,
    judged,
    jupyter_server,
)

GROUP = "13 fleet"
SAMPLES_AFTER_S = 900  # the backfilled samples run this long past now: the run's whole span
LISTINGS = int(os.environ.get("TWBENCH_FLEET_LISTINGS", "3"))
CACHE_S = 2.0  # server/fleet/api.py: a listing is reused this long


def sizes(cfg: Config) -> list[int]:
    named = os.environ.get("TWBENCH_FLEET_SIZES")
    if named:
        return [int(n) for n in named.split(",")]
    return [100, 1000] if cfg.quick else [100, 1000, 10000]


def modes() -> list[bool]:
    """With our rules loaded or not (``TWBENCH_FLEET_MODES=recorded`` for one: at 10,000
    hosts the inline listing alone takes minutes of this row)."""
    named = os.environ.get("TWBENCH_FLEET_MODES", "inline,recorded").split(",")
    return [mode == "recorded" for mode in named]


def run(cfg: Config) -> list[Row]:
    rows: list[Row] = []
    for n in sizes(cfg):
        rows += guarded(GROUP, f"N={n}", lambda n=n: one(n))
    return rows


def _status(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` size in bytes (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _schedstat(pid: int) -> tuple[float, float]:
    """(seconds on a core, seconds waiting in a run queue) of the main thread of ``pid``
    (Jupyter's event loop), from ``/proc/<pid>/schedstat``: what of a slow answer was the
    loop's own work, and what was the machine's other work ahead of it."""
    ran, queued, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(ran) / 1e9, int(queued) / 1e9


def _children(pid: int) -> list[int]:
    """The listing worker processes of server ``pid`` (server.fleet.listing: their CPU and
    memory are the listing's too)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    listing = b"trainwatch_lab.server.fleet.listing"
    return [c for c in out if listing in Path(f"/proc/{c}/cmdline").read_bytes()]


def prometheus_time(url: str, recorded: set[str]) -> float:
    """Wall time of the listing's queries sent at once, as the server sends them."""
    at = f"{time.time():.3f}"

    def ask(expr: str) -> int:
        query = urllib.parse.urlencode({"query": expr, "time": at})
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=300) as resp:
            return len(resp.read())

    started = time.monotonic()
    queries = instant_queries("1m", recorded=recorded)
    with ThreadPoolExecutor(len(queries)) as pool:
        list(pool.map(ask, queries.values()))
    return time.monotonic() - started


def loop_lag(url: str) -> tuple[float, float, float]:
    """(longest lateness of a 5 ms timer, the loop thread's CPU during that longest wait,
    listing wall) with ``server.fleet.api.Fleet`` on an asyncio loop in this process: what the
    server's own loop sees, without HTTP clients (median of ``LISTINGS`` listings). The
    CPU part is work done on the loop; the rest of a wait is the thread waiting for a core
    (a loaded machine) or for the GIL."""
    import asyncio
    from types import SimpleNamespace

    from trainwatch_lab.core.defaults import DEFAULTS
    from trainwatch_lab.server.fleet.api import Fleet

    async def main() -> list[tuple[float, float, float]]:
        config = SimpleNamespace(
            prometheus_url=url, prometheus_timeout_s=300.0, fleet_rate_window="1m"
        )
        fleet = Fleet(config, DEFAULTS)  # type: ignore[arg-type]
        out = []
        for _ in range(LISTINGS):
            fleet._cached = None
            started, lag, busy = time.monotonic(), 0.0, 0.0
            task = asyncio.ensure_future(fleet.hosts())
            while not task.done():
                asked, cpu = time.monotonic(), time.thread_time()
                await asyncio.sleep(0.005)
                late = time.monotonic() - asked - 0.005
                if late > lag:
                    lag, busy = late, time.thread_time() - cpu
            task.result()
            out.append((lag, busy, time.monotonic() - started))
        fleet.close()
        return out

    runs = asyncio.run(main())
    return tuple(statistics.median(r[i] for r in runs) for i in range(3))  # type: ignore[return-value]


def one(n: int) -> list[Row]:
    """N hosts backfilled once, listed twice: Prometheus without our rules (the server
    computes the per-host series inline) and with them (it reads what they recorded)."""
    from tests.prometheus.fleet_synthetic import backfill, serve_backfilled

    home = Path(tempfile.mkdtemp(prefix="twbench-fleet-"))
    try:
        began = time.monotonic()
        backfill(n, home / "data", home, SAMPLES_AFTER_S)
        note = f"backfill {time.monotonic() - began:.0f} s"
        rows: list[Row] = []
        for rules in modes():
            store, close = serve_backfilled(home, n, rules=rules)
            args = [
                f"--TrainWatch.prometheus_url={store.url}",
                "--TrainWatch.prometheus_timeout_s=300",
            ]
            try:
                with jupyter_server(extensions={"trainwatch_lab": True}, extra_args=args) as srv:
                    how = "recorded" if rules else "inline"
                    rows += measure(f"N={n} {how}", n, store.url, srv, note)
            finally:
                close()
        return rows
    finally:
        shutil.rmtree(home, ignore_errors=True)


def measure(label: str, n: int, prom_url: str, srv: Server, note: str) -> list[Row]:
    pid = srv.proc.pid
    auth = {"Authorization": f"token {srv.token}"}

    def get(path: str) -> tuple[float, bytes]:
        asked = time.monotonic()
        req = urllib.request.Request(srv.url + path, headers=auth)
        with urllib.request.urlopen(req, timeout=600) as resp:
            body = resp.read()
        return time.monotonic() - asked, body

    warm = json.loads(get("trainwatch-lab/api/fleet")[1])  # Prometheus's caches, our imports
    assert len(warm["hosts"]) == n and warm["recorded"] is label.endswith("recorded"), warm
    recorded = set(host_series("1m")) if warm["recorded"] else set()
    prom = statistics.median(prometheus_time(prom_url, recorded) for _ in range(LISTINGS))
    walls, cpus, peaks, worker_cpus, worker_peaks, stalls, size = [], [], [], [], [], [], 0
    stall_parts: list[tuple[float, float]] = []
    workers = _children(pid)  # started by the warm-up listing
    for _ in range(LISTINGS):
        time.sleep(CACHE_S + 0.5)  # past the cache: a listing of its own
        for p in (pid, *workers):
            Path(f"/proc/{p}/clear_refs").write_text("5")  # VmHWM := VmRSS
        rss = {p: _status(p, "VmRSS") for p in (pid, *workers)}
        cpu = {p: _process_cpu_ns(p) or 0 for p in (pid, *workers)}
        wall, body = get("trainwatch-lab/api/fleet")
        used = {p: ((_process_cpu_ns(p) or 0) - cpu[p]) / 1e9 for p in cpu}
        peak = {p: _status(p, "VmHWM") - rss[p] for p in rss}
        cpus.append(used.pop(pid))
        peaks.append(peak.pop(pid))
        worker_cpus.append(sum(used.values()))
        worker_peaks.append(sum(peak.values()))
        walls.append(wall)
        size = len(body)
    # the stall a client sees: /api/status back to back while a listing is computed
    for _ in range(LISTINGS):
        time.sleep(CACHE_S + 0.5)
        waits: list[tuple[float, float, float]] = []
        listing = threading.Thread(target=get, args=("trainwatch-lab/api/fleet",))
        listing.start()
        while listing.is_alive():
            ran, queued = _schedstat(pid)
            wait = get("api/status")[0]
            ran_after, queued_after = _schedstat(pid)
            waits.append((wait, ran_after - ran, queued_after - queued))
        listing.join()
        longest = max(waits)
        stalls.append(longest[0])
        stall_parts.append(longest[1:])
    wall, cpu, peak, stall, worker_cpu, worker_peak = (
        statistics.median(v) for v in (walls, cpus, peaks, stalls, worker_cpus, worker_peaks)
    )
    worker_rss = sum(_status(p, "VmRSS") for p in workers)
    lag, lag_cpu, lag_wall = loop_lag(prom_url)
    rss_total = _status(pid, "VmRSS")
    goal = {100: None, 1000: 1.0, 10000: 5.0}.get(n)
    note = f"{note}; {LISTINGS} listings, median; load average {os.getloadavg()[0]:.1f}"
    return [
        Row(
            GROUP,
            f"{label}: listing end to end (GET api/fleet)",
            f"{wall:.3f} s",
            f"<= {goal:g} s" if goal else "",
            judged(wall <= goal) if goal else "",
            note,
            data={"walls": walls},
        ),
        Row(
            GROUP,
            f"{label}: Prometheus query time (the listing's queries at once)",
            f"{prom:.3f} s",
        ),
        Row(
            GROUP,
            f"{label}: server CPU for one listing",
            f"{cpu:.3f} s",
            note=f"server RSS after the runs {fmt_bytes(rss_total)}",
            data={"cpus": cpus},
        ),
        Row(
            GROUP,
            f"{label}: listing worker process CPU for one listing",
            f"{worker_cpu:.3f} s",
            note=f"{len(workers)} worker(s), RSS after the runs {fmt_bytes(worker_rss)}",
            data={"cpus": worker_cpus},
        ),
        Row(
            GROUP,
            f"{label}: server peak RSS during one listing, above its RSS before",
            fmt_bytes(peak),
            "<= 200 MB" if n >= 10000 else "",
            judged(peak <= 200e6) if n >= 10000 else "",
            data={"peaks": peaks},
        ),
        Row(
            GROUP,
            f"{label}: server + worker peak RSS during one listing, above their RSS before",
            fmt_bytes(peak + worker_peak),
            "<= 200 MB" if n >= 10000 else "",
            judged(peak + worker_peak <= 200e6) if n >= 10000 else "",
            f"worker {fmt_bytes(worker_peak)}",
            data={"peaks": worker_peaks},
        ),
        Row(
            GROUP,
            f"{label}: longest event-loop stall (longest /api/status during a listing)",
            f"{stall * 1000:.0f} ms",
            "<= 50 ms",
            judged(stall <= 0.05),
            f"per listing: {', '.join(f'{s * 1000:.0f}' for s in stalls)} ms; of each, the "
            "loop thread on a core / waiting for one: "
            + ", ".join(f"{r * 1000:.0f}/{q * 1000:.0f}" for r, q in stall_parts)
            + " ms",
            data={"stalls": stalls, "on_core_waiting": stall_parts},
        ),
        Row(
            GROUP,
            f"{label}: longest loop lag with Fleet on an asyncio loop (5 ms timer)",
            f"{lag * 1000:.0f} ms",
            "<= 50 ms",
            judged(lag <= 0.05),
            f"of which {lag_cpu * 1000:.0f} ms on the loop thread's CPU; listing {lag_wall:.3f} s"
            " in that process",
        ),
        Row(GROUP, f"{label}: reply size", fmt_bytes(size), data={"bytes": size}),
    ]
