"""``<base_url>/trainwatch-lab/metrics``: the server's sample for Prometheus, as the agent
serves it (prometheus.metrics: node_exporter's names for disks and filesystems,
``trainwatch_*`` for the rest).

Authenticated like every endpoint (a token in Prometheus's ``authorization`` setting) unless
``c.TrainWatch.authenticate_prometheus = False``, the switch jupyter_server has for its own
``/metrics``. A scrape formats the latest finished sample from memory, on the hub's executor:
the event loop never samples, never formats 5 KiB of text, and never waits on a disk. A
scrape holds the sampler's lease until the next scrape is due (server.lease), so rates and
fill trends are there on every scrape, not only on the first after a restart.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from tornado import web

from ..core.model import Sample
from ..core.storage.diskstats import DiskCounters
from ..prometheus.metrics import exposition
from .handlers import AUTH_RESOURCE
from .hub import SETTINGS_KEY, Hub

try:
    from jupyter_server.auth.decorator import allow_unauthenticated
except ImportError:  # jupyter_server < 2.13 has no such check: nothing to mark

    def allow_unauthenticated(method: Any) -> Any:
        return method


# the first scrape of a stopped sampler waits for its first sample at most this long, or
# most of the timeout Prometheus announces (X-Prometheus-Scrape-Timeout-Seconds)
FIRST_SAMPLE_WAIT_S = 5.0


def render(sample: Sample | None, counters: Mapping[str, DiskCounters], gzipped: bool) -> bytes:
    """The text format 0.0.4 of one sample, gzipped (level 1: 5 KiB) when asked."""
    body = exposition(sample, counters)
    return gzip.compress(body, compresslevel=1) if gzipped else body


class MetricsHandler(JupyterHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def hub(self) -> Hub:
        return self.settings[SETTINGS_KEY]

    def _wait_s(self) -> float:
        announced = self.request.headers.get("X-Prometheus-Scrape-Timeout-Seconds")
        try:
            budget = 0.8 * float(announced) if announced else FIRST_SAMPLE_WAIT_S
        except ValueError:
            budget = FIRST_SAMPLE_WAIT_S
        return max(0.1, min(budget, FIRST_SAMPLE_WAIT_S, self.hub.config.snapshot_wait_s))

    @allow_unauthenticated  # decided here: the switch may turn authentication off
    async def get(self) -> None:
        hub = self.hub
        if hub.config.authenticate_prometheus:
            user = self.current_user
            if user is None:
                self.log.warning("trainwatch metrics: unauthenticated scrape refused")
                raise web.HTTPError(403)
            if not self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE):
                raise web.HTTPError(403)
        sample, counters = await hub.scrape(self._wait_s())
        gzipped = "gzip" in self.request.headers.get("Accept-Encoding", "")
        body = await hub.in_executor(render, sample, counters, gzipped)
        self.set_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
        self.set_header("Cache-Control", "no-store")
        if gzipped:
            self.set_header("Content-Encoding", "gzip")
        self.finish(body)


def routes(base_url: str) -> list[tuple[str, type]]:
    return [(url_path_join(base_url, "trainwatch-lab", "metrics"), MetricsHandler)]
