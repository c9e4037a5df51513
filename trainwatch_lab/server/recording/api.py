"""``GET <base_url>/trainwatch-lab/api/recorded`` (a chart's points), ``recorded/events`` and
``recorded/why``: the recorded history (issue 27) for the panel's replay.

Read-only (a GET never writes): the file is opened read-only per request, on this
module's own single thread, never on the event loop nor in the hub's executor (a long
query there would starve the sampler's start and stop, and a timed-out wait does not stop
its thread): queries run one at a time, a request waits at most 30 s for its answer. Every
parameter has a limit: a window of at most ``record_keep_days``, a series pattern of at
most 200 characters, at most 10,000 points a series (thinned to bucket means, read in
slices with a budget of decoded points: core.record.query.chart) and 10,000 events.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ...core.record import StoreError, choose, query
from ..handlers import API, BadRequest, BaseHandler, parse_float

MAX_PATTERN = 200
MAX_EVENTS = 10_000
WAIT_S = 30.0
# one query at a time, on a thread of its own (made when the first GET comes)
QUERIES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainwatch-recorded")


class RecordedBase(BaseHandler):
    def store_path(self) -> str:
        recording = self.hub.recording
        if recording is not None:
            path = recording.recorder.path
        else:
            try:
                path = choose(explicit_file=self.hub.config.record_path or None).path
            except LookupError as exc:
                raise web.HTTPError(404, str(exc)) from None
        if not os.path.exists(path):
            raise NoHistory(path)
        return path

    def window(self) -> tuple[float, float]:
        now = time.time()
        keep = self.hub.config.record_keep_days * 86_400.0
        until = parse_float("until", self.arg("until"), 0.0, 1e12) or now
        since = parse_float("since", self.arg("since"), 0.0, 1e12)
        since = until - 3600.0 if since is None else since
        if since >= until:
            raise BadRequest("'since' must be before 'until'")
        if until - since > keep + 86_400.0:
            raise BadRequest(f"the window is longer than the history keeps ({keep / 86400:g} days)")
        return since, until

    async def answer(self, fn: Any, *args: Any) -> None:
        try:
            path = self.store_path()
        except NoHistory as exc:
            return self.bad(f"no recorded history at {exc}", 404)
        # a queued request that times out is cancelled before it starts
        fut = asyncio.get_running_loop().run_in_executor(QUERIES, fn, path, *args)
        try:
            answer = await asyncio.wait_for(fut, WAIT_S)
        except StoreError as exc:  # a foreign file at the history's path: never read
            return self.bad(str(exc), 409)
        except asyncio.TimeoutError:
            return self.bad(
                f"the history did not answer in {WAIT_S:g} s; try a shorter window", 503
            )
        self.send_json(answer)


class NoHistory(Exception):
    """The history file does not exist (yet)."""


class ChartHandler(RecordedBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("since", "until", "series", "points")
        since, until = self.window()
        pattern = self.arg("series")
        if pattern is not None and (len(pattern) > MAX_PATTERN or "\x00" in pattern):
            raise BadRequest(f"'series' must be a pattern of at most {MAX_PATTERN} characters")
        points = parse_float("points", self.arg("points"), 2, query.MAX_POINTS)
        await self.answer(query.chart, since, until, pattern, int(points or 1000))


class EventsHandler(RecordedBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("since", "until", "limit")
        since, until = self.window()
        limit = parse_float("limit", self.arg("limit"), 1, MAX_EVENTS)
        await self.answer(query.events, since, until, int(limit or 1000))


class WhyHandler(RecordedBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("since", "until")
        since, until = self.window()
        await self.answer(query.ended, since, until)


def routes(base_url: str) -> list[tuple[str, type]]:
    def route(name: str) -> str:
        return url_path_join(base_url, API, name)

    return [
        (route("recorded"), ChartHandler),
        (route("recorded/events"), EventsHandler),
        (route("recorded/why"), WhyHandler),
    ]
