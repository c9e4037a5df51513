"""The fleet for the panel: every host Prometheus scrapes, and one host's charts.

``GET api/fleet`` lists one entry per host (prometheus.fleet.fold: worst warning and the
warnings, its state, GPU utilization, the busiest disk, the least free filesystem, last
seen: what a row of the panel shows and its filter box reads, nothing more), with ``counts``
(hosts per state), ``fixes`` (the fix of each warning code derived from node_exporter's and
DCGM's numbers, once rather than with every host's warning) and ``recorded`` (whether every
per-host series was read from the recording rules of ``trainwatch-lab rules`` rather than
computed inline);
``GET api/fleet/range?host=H&window=S`` returns that host's charts over the last S seconds
from ``query_range``. Without ``c.TrainWatch.prometheus_url`` the listing says so
(``"prometheus": null``) and the panel hides its Fleet section. Prometheus down, slow or
refusing is a 502 with one line; bad parameters a 400 with one line; nothing waits longer
than ``c.TrainWatch.prometheus_timeout_s`` for Prometheus. The listing's queries, decoding
their answers, folding them and encoding the reply run in a worker process
(server.fleet.listing): the event loop (every notebook's requests) never waits on them, not
even for the GIL; it awaits the finished reply.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ...core.defaults import Defaults
from ...prometheus.fleet import (
    HOST_RE,
    MAX_WINDOW_S,
    MIN_WINDOW_S,
    chart_lines,
    chart_specs,
    counts,
    grid,
    instant_queries,
)
from ...prometheus.rules.fleet import host_series
from ..config import ServerSettings
from ..handlers import API, BadRequest, BaseHandler, parse_float
from . import listing as fleet_listing
from .promclient import NoAnswer, PrometheusClient, PrometheusError
from .promfetch import Endpoint

SETTINGS_KEY = "trainwatch_fleet"
CACHE_S = 2.0  # panels in many tabs share one listing (and one round of queries)
RECORDED_S = 300.0  # how often to ask which of the fleet's recording rules Prometheus has
RECORDED = '{__name__=~"trainwatch:.+"}'
NOT_SET = "no Prometheus is configured: set c.TrainWatch.prometheus_url"
UNITS = {"s": 1, "m": 60, "h": 3600}


def seconds(window: str) -> float:
    """``30s``/``1m``/``2h`` (a validated c.TrainWatch.fleet_rate_window) in seconds."""
    m = re.fullmatch(r"(\d+)([smh])", window)
    return float(int(m.group(1)) * UNITS[m.group(2)]) if m else 60.0


class Fleet:
    """Reads the fleet from Prometheus; one listing in flight at a time, reused for
    ``CACHE_S``."""

    def __init__(self, config: ServerSettings, defaults: Defaults) -> None:
        self.client = PrometheusClient(config.prometheus_url, config.prometheus_timeout_s)
        self.url = self.client.url  # as shown: without a password
        self.rate_window = config.fleet_rate_window
        self.defaults = defaults
        self._cached: tuple[float, bytes] | None = None
        self._recorded_at: tuple[float, frozenset[str]] | None = None
        self._pending: asyncio.Future[bytes] | None = None
        self.worker = fleet_listing.ListingProcess()  # decodes, folds, encodes a listing

    async def hosts(self) -> bytes:
        """The listing, as the JSON body of ``GET fleet`` (encoded off the loop, once for
        every tab that asks while it is fresh)."""
        cached = self._cached
        if cached is not None and time.monotonic() - cached[0] < CACHE_S:
            return cached[1]
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(self._hosts())
        return await asyncio.shield(self._pending)

    async def _hosts(self) -> bytes:
        at = time.time()
        recorded = await self._recorded(at)
        queries = instant_queries(self.rate_window, self.defaults, recorded)
        every = set(host_series(self.rate_window, self.defaults)) <= recorded
        # the worker asks Prometheus within the timeout (from when it takes the listing),
        # then folds within as long again
        timeout_s = self.client.timeout_s
        where = Endpoint(self.client.base, timeout_s)
        args = (where, queries, at, every, self.defaults)
        body = await self.worker.run(*args, timeout_s=2 * timeout_s)
        self._cached = (time.monotonic(), body)
        return body

    async def _recorded(self, at: float) -> frozenset[str]:
        """The fleet's recording rules Prometheus has (``trainwatch-lab rules`` loaded; a
        rule that records nothing now counts too), else the recorded series a store holds
        (one that evaluates no rules itself: VictoriaMetrics behind vmalert); asked again
        every ``RECORDED_S``, none on a store that can say neither."""
        if self._recorded_at is not None and at - self._recorded_at[0] < RECORDED_S:
            return self._recorded_at[1]
        names: list[str] = []
        asks = (
            self.client.recording_rules,
            lambda: self.client.names(RECORDED, at - RECORDED_S, at),
        )
        for ask in asks:
            try:
                names = (await self.client.gather({"names": ask()}))["names"]
            except NoAnswer:
                raise  # down or silent: the listing says so now, not after a second wait
            except PrometheusError:
                names = []  # it answered, without rules or names: compute inline
            if names:
                break
        found = frozenset(names)
        self._recorded_at = (at, found)
        return found

    async def charts(self, host: str, window_s: float) -> dict[str, Any]:
        start, end, step = grid(window_s, time.time())
        count = round((end - start) / step) + 1
        specs = chart_specs(host, max(seconds(self.rate_window), step))
        q = self.client.query_range
        calls = {
            f"{spec['id']}:{i}": q(expr, start, end, step)
            for spec in specs
            for i, expr in enumerate(spec["queries"])
        }
        answers = await self.client.gather(calls)

        def lines() -> list[dict[str, Any]]:
            return [
                chart_lines(
                    spec,
                    [answers[f"{spec['id']}:{i}"] for i in range(len(spec["queries"]))],
                    start,
                    step,
                    count,
                )
                for spec in specs
            ]

        charts = await self.client.off_loop(lines)
        return {
            "host": host,
            "window_s": window_s,
            "step_s": step,
            "t": [start + i * step for i in range(count)],
            "charts": charts,
        }

    def close(self) -> None:
        self.client.close()
        self.worker.close()


class FleetBase(BaseHandler):
    def compute_etag(self) -> None:
        """None: tornado would hash every reply on the loop (a listing is megabytes at
        cluster size) for a tag that never matches (each listing has its own time)."""
        return None

    @property
    def fleet(self) -> Fleet | None:
        return self.settings.get(SETTINGS_KEY)

    async def answer(self, call: Any) -> None:
        try:
            reply = await call
        except PrometheusError as exc:
            return self.bad(str(exc), 502)
        except fleet_listing.WorkerDied as exc:
            return self.bad(str(exc), 500)
        if isinstance(reply, bytes):  # encoded already, off the loop
            self.set_header("Content-Type", "application/json")
            return self.finish(reply)
        self.send_json(reply)


class FleetHandler(FleetBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only()
        if self.fleet is None:
            return self.send_json({"prometheus": None, "counts": counts([]), "hosts": []})
        await self.answer(self.fleet.hosts())


class FleetRangeHandler(FleetBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("host", "window")
        host = self.arg("host")
        if host is None:
            raise BadRequest("missing parameter 'host'")
        if not HOST_RE.fullmatch(host):
            raise BadRequest(f"'host' must be a host name or address from GET fleet, got {host!r}")
        window = parse_float("window", self.arg("window"), MIN_WINDOW_S, MAX_WINDOW_S) or 3600.0
        if self.fleet is None:
            return self.bad(NOT_SET, 404)
        await self.answer(self.fleet.charts(host, window))


def make_fleet(config: ServerSettings, defaults: Defaults) -> Fleet | None:
    return Fleet(config, defaults) if config.prometheus_url else None


def routes(base_url: str) -> list[tuple[str, type]]:
    return [
        (url_path_join(base_url, API, "fleet"), FleetHandler),
        (url_path_join(base_url, API, "fleet", "range"), FleetRangeHandler),
    ]
