"""Instant queries of Prometheus's API from the fleet listing's worker process: a plain
blocking client (``http.client``), one thread per query, all within one deadline.

Why not the server's tornado client: at 10,000 hosts a listing's answers are 30 MB of JSON
(3 MB gzipped); tornado decompresses them on the event loop and the server then piped them to
the worker, so the loop of every notebook carried each byte twice. Here the worker asks,
decompresses and folds, and the server only awaits the finished reply.

Every call is what ``promclient.request`` builds (the same URL, basic auth, headers), with
the same TLS defaults as tornado's client (the system's CA store, certificates verified), no
proxy and no redirect followed; failures are the same one-line ``PrometheusError``s.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

from ...advice.text import fmt_bytes
from ...core.defaults import PROMETHEUS_ANSWER_MAX
from .promclient import JSON, Answer, PrometheusError, late, request, shown, unreachable, why


@dataclass(frozen=True)
class Endpoint:
    """Where the listing's worker asks: ``base`` as configured (with any password: it only
    travels down our own pipe), ``timeout_s`` as c.TrainWatch.prometheus_timeout_s."""

    base: str
    timeout_s: float

    @property
    def url(self) -> str:
        """The URL as every message shows it (no password), as PrometheusClient's."""
        return shown(self.base.rstrip("/"))


def query_all(
    where: Endpoint, queries: Mapping[str, str], at: float, deadline: float
) -> dict[str, Answer]:
    """Every instant query of ``queries`` (name -> PromQL) at time ``at``, sent at once and
    answered by ``deadline`` (``time.monotonic``, the same clock in every process), as
    undecoded answers (``promclient.data`` judges them); the first call that fails raises
    its one line, and a late one ``late``."""
    names = list(queries)
    pool = ThreadPoolExecutor(len(names) or 1, thread_name_prefix="trainwatch-prometheus")
    talking = _Talking()
    try:
        calls = {
            n: pool.submit(
                _get, where, {"query": queries[n], "time": f"{at:.3f}"}, deadline, talking
            )
            for n in names
        }
        done, _ = wait(calls.values(), max(0.0, deadline - time.monotonic()), FIRST_EXCEPTION)
        failed = [e for n in names if calls[n] in done and (e := calls[n].exception())]
        if failed:  # the first in the listing's order: the same line for the same failure
            raise failed[0]
        if len(done) < len(calls):
            raise late(where.url, where.timeout_s)
        answers = {n: calls[n].result() for n in names}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        talking.hang_up()  # a straggler's read ends now, not when Prometheus stops sending
    return answers


class _Talking:
    """The connections a listing's calls hold open. Hung up once the listing is answered
    or late: a Prometheus (or a proxy) that sends a byte now and then beats every socket
    timeout, and the worker, which serves listing after listing, would keep a thread
    reading it for as long as it trickles."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._over = False

    def add(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if self._over:
                raise TimeoutError
            self._open.add(conn)

    def discard(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._open.discard(conn)

    def hang_up(self) -> None:
        with self._lock:
            self._over = True
            held, self._open = self._open, set()
        for conn in held:  # shutdown, not close: it wakes a read blocked in another thread
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)


def _get(where: Endpoint, params: dict[str, str], deadline: float, talking: _Talking) -> Answer:
    """One call of ``query``, as it came (decompressed), once Prometheus answered at all."""
    url, headers = request(where.base, "query", params)
    parts = urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise late(where.url, where.timeout_s)
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.netloc, timeout=left, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.netloc, timeout=left)
    try:
        talking.add(conn)
        conn.request("GET", f"{parts.path}?{parts.query}", headers=headers)
        response = conn.getresponse()
        body = _body(where, response)
    except TimeoutError:
        raise late(where.url, where.timeout_s) from None
    except http.client.HTTPException as exc:
        raise unreachable(where.url, str(exc) or type(exc).__name__) from None
    except OSError as exc:
        raise unreachable(where.url, why(exc)) from None
    finally:
        talking.discard(conn)
        conn.close()
    kind = response.getheader("Content-Type", "") or ""
    return Answer(where.url, response.status, body, kind.startswith(JSON))


def _body(where: Endpoint, response: http.client.HTTPResponse) -> bytes:
    """The answer's body, gunzipped; more than ``PROMETHEUS_ANSWER_MAX`` is refused."""
    limit = PROMETHEUS_ANSWER_MAX
    raw = response.read(limit + 1)
    if response.getheader("Content-Encoding", "").lower() == "gzip":
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        raw = inflate.decompress(raw, limit + 1)
    if len(raw) > limit:
        raise PrometheusError(
            f"Prometheus at {where.url} answered more than {fmt_bytes(limit)} to one query"
        )
    return raw
