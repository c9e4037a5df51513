"""Prometheus's HTTP API from the server, never from the browser, never blocking the loop.

Tornado's non-blocking client (DNS on the loop's resolver thread), every call bounded by one
deadline: Prometheus down, slow or not Prometheus at all becomes one ``PrometheusError``
line that the endpoint and the panel show as it is. Answers are decoded on the client's
worker thread, never on the event loop. The fleet's listing (megabytes of JSON at cluster
size) is asked by its worker process instead (server.fleet.promfetch, a blocking client): both
send what ``request`` builds, and say what went wrong in the same words (``late``,
``unreachable``, ``data``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...core.defaults import PROMETHEUS_ANSWER_MAX
from ...core.redact import redact

USER_AGENT = "trainwatch-lab (Jupyter server extension)"
JSON = "application/json"


class PrometheusError(Exception):
    """One line saying what went wrong, naming the Prometheus asked."""


class NoAnswer(PrometheusError):
    """Prometheus did not answer at all (down, unreachable, too slow), as opposed to an
    answer that refuses or is not the API's."""


shown = redact  # the URL as messages show it: ``http://user:***@prom`` (core.redact)


def request(base: str, endpoint: str, params: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(URL, headers) of one call of the API at ``base``, as both clients send it: a
    ``user:password@`` of the base becomes basic auth (as tornado's client did with it in
    the URL), gzip asked for (tornado's default; a cluster's answers shrink tenfold)."""
    parts = urlsplit(base)
    headers = {"Accept": JSON, "User-Agent": USER_AGENT, "Accept-Encoding": "gzip"}
    userinfo, at, netloc = parts.netloc.rpartition("@")
    if at:
        user, _, password = userinfo.partition(":")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    query = urlencode(params)
    url = urlunsplit(parts._replace(netloc=netloc)).rstrip("/")
    return f"{url}/api/v1/{endpoint}?{query}", headers


def late(url: str, timeout_s: float) -> NoAnswer:
    return NoAnswer(f"Prometheus at {url} did not answer within {timeout_s:g} s")


def unreachable(url: str, why: str) -> NoAnswer:
    return NoAnswer(f"Prometheus at {url} is not reachable: {why}")


@dataclass(frozen=True)
class Answer:
    """One HTTP answer of Prometheus's API, undecoded; ``url`` names it in messages."""

    url: str
    code: int
    body: bytes
    json: bool = True  # said to be JSON (Content-Type)


class PrometheusClient:
    def __init__(self, url: str, timeout_s: float) -> None:
        self.base = url.rstrip("/")
        self.url = shown(self.base)  # what every message says
        self.timeout_s = timeout_s
        self._http: AsyncHTTPClient | None = None
        # decoding (and the caller's folding, through ``off_loop``): one thread, so that a
        # listing's work never takes both cores from the kernels
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="trainwatch-fleet")

    async def off_loop(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the client's worker thread, awaited from the loop."""
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    @property
    def http(self) -> AsyncHTTPClient:
        if self._http is None:  # bound to the running loop: made on first use
            self._http = AsyncHTTPClient(
                force_instance=True, max_clients=32, max_body_size=PROMETHEUS_ANSWER_MAX
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        self._worker.shutdown(wait=False, cancel_futures=True)

    def late(self) -> NoAnswer:
        return late(self.url, self.timeout_s)

    async def gather(self, calls: Mapping[str, Any]) -> dict[str, Any]:
        """Await every call of ``calls`` (name -> awaitable) at once, within the deadline."""
        names = list(calls)
        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*(calls[n] for n in names)), self.timeout_s
            )
        except asyncio.TimeoutError:
            raise self.late() from None
        return dict(zip(names, answers, strict=True))

    async def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        return (await self._get("query", params))["result"]

    async def query_range(
        self, expr: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return (await self._get("query_range", params))["result"]

    async def names(self, match: str, since: float, until: float) -> list[str]:
        """The metric names of the series ``match`` selects between two times (the index,
        not the samples: cheap whatever the size)."""
        params = {"match[]": match, "start": f"{since:.3f}", "end": f"{until:.3f}"}
        data = await self._get("label/__name__/values", params)
        return [str(n) for n in data] if isinstance(data, list) else []

    async def recording_rules(self) -> list[str]:
        """The names the loaded recording rules record (``/api/v1/rules?type=record``:
        Prometheus, Thanos, Mimir; a store without rules answers an error)."""
        data = await self._get("rules", {"type": "record"})
        groups = data.get("groups", []) if isinstance(data, dict) else []
        return [str(r.get("name")) for g in groups for r in g.get("rules", [])]

    async def _get(self, endpoint: str, params: dict[str, str]) -> Any:
        """``data`` of one call, decoded on the worker thread."""
        return await self.off_loop(data, await self._body(endpoint, params))

    async def _body(self, endpoint: str, params: dict[str, str]) -> Answer:
        """One call's answer as it came, once Prometheus answered at all."""
        url, headers = request(self.base, endpoint, params)
        call = HTTPRequest(
            url,
            connect_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
            headers=headers,
            follow_redirects=False,
        )
        try:
            response = await self.http.fetch(call, raise_error=False)
        except HTTPClientError as exc:  # no HTTP answer (599): raised whatever raise_error
            if "Timeout" in str(exc):
                raise self.late() from None
            raise unreachable(self.url, str(exc)) from None
        except (ConnectionError, socket.gaierror, OSError) as exc:
            raise unreachable(self.url, why(exc)) from None
        if response.code == 599:  # tornado: no HTTP answer (timeout, connection closed)
            error = response.error
            if isinstance(error, HTTPClientError) and "Timeout" in str(error):
                raise self.late()
            raise unreachable(self.url, getattr(error, "strerror", None) or str(error))
        kind = response.headers.get("Content-Type", "")
        return Answer(self.url, response.code, response.body or b"", kind.startswith(JSON))


def why(exc: BaseException) -> str:
    """An OS error in a few words: ``Connection refused``, ``Name or service not known``."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def data(answer: Answer) -> Any:
    """``data`` of an API answer, or the one line to show (a pure function: the fleet's
    listing calls it in its own process)."""
    try:
        payload = json.loads(answer.body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or "status" not in payload:
        raise PrometheusError(
            f"{answer.url} answered HTTP {answer.code} but not as Prometheus's HTTP API "
            "(check c.TrainWatch.prometheus_url)"
        )
    if payload["status"] != "success":
        raise PrometheusError(
            f"Prometheus at {answer.url} refused a query (HTTP {answer.code}): "
            f"{payload.get('error') or payload.get('errorType') or 'no reason given'}"
        )
    return payload.get("data") or {"result": []}


def result(answer: Answer) -> list[dict[str, Any]]:
    """The ``result`` list of a query's answer."""
    return data(answer)["result"]
