"""The fleet listing's worker asks Prometheus with a blocking client of its own
(server.fleet.promfetch); the server's tornado client asks everything else. Both send what
``promclient.request`` builds: against a real HTTP server that records what arrives, the two
requests are the same (path, basic auth from the URL, gzip asked for), and both read the
gzipped answer alike. An answer that inflates past the limit is refused in one line."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from trainwatch_lab.server.fleet import promfetch
from trainwatch_lab.server.fleet.promclient import PrometheusClient, PrometheusError, result
from trainwatch_lab.server.fleet.promfetch import Endpoint, query_all

SERIES = [{"metric": {"instance": f"n{i}:9100"}, "value": [1.0, "1"]} for i in range(500)]
ANSWER = json.dumps({"status": "success", "data": {"resultType": "vector", "result": SERIES}})
SAME = ("Host", "Accept", "Accept-Encoding", "Authorization", "User-Agent")


class Recorded(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []
    body = ANSWER.encode()

    def do_GET(self) -> None:
        self.seen.append((self.path, {k: self.headers.get(k, "") for k in SAME}))
        body = self.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, type[Recorded]]]:
    """A real HTTP server on 127.0.0.1 answering every GET with ``body``, gzipped when
    asked, and keeping each request's path and headers."""
    handler = type("Handler", (Recorded,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


async def test_the_worker_sends_what_the_servers_client_sends(recorder) -> None:
    netloc, handler = recorder
    base = f"http://ops:s3cret@{netloc}/prom/"
    at = 1_700_000_000.0
    client = PrometheusClient(base, 5.0)
    try:
        from_server = await client.query("up", at)
    finally:
        client.close()
    answers = query_all(Endpoint(base, 5.0), {"up": "up"}, at, time.monotonic() + 5)
    from_worker = result(answers["up"])
    assert from_server == from_worker == SERIES
    assert answers["up"].url == f"http://ops:***@{netloc}/prom"  # as messages show it

    (server_path, server_headers), (worker_path, worker_headers) = handler.seen
    assert server_path == worker_path
    assert server_path.startswith("/prom/api/v1/query?query=up&time=1700000000.000")
    assert worker_headers == server_headers
    assert server_headers["Authorization"] == "Basic b3BzOnMzY3JldA=="  # ops:s3cret
    assert server_headers["Accept-Encoding"] == "gzip" and server_headers["Host"] == netloc


def test_an_answer_that_inflates_past_the_limit_is_refused_in_one_line(
    recorder, monkeypatch
) -> None:
    netloc, handler = recorder
    handler.body = b" " * 10_000 + ANSWER.encode()  # 10 kB gzipped to a few hundred bytes
    monkeypatch.setattr(promfetch, "PROMETHEUS_ANSWER_MAX", 2048)
    with pytest.raises(PrometheusError) as info:
        query_all(Endpoint(f"http://{netloc}", 5.0), {"up": "up"}, 0.0, time.monotonic() + 5)
    assert str(info.value) == (
        f"Prometheus at http://{netloc} answered more than 2 KiB to one query"
    )


class Trickle(BaseHTTPRequestHandler):
    """Sends a byte every 0.2 s for a minute, of its headers or, after them, of its body:
    each read gets a byte before any socket timeout, and only a deadline ends it."""

    part = "body"

    def do_GET(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        if self.part == "body":
            self.wfile.write(b"Content-Type: application/json\r\nContent-Length: 300\r\n\r\n")
        else:
            self.wfile.write(b"X-Slow: ")
        for _ in range(300):
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:  # the client gave up: what the test wants
                return
            time.sleep(0.2)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("part", ["headers", "body"])
def test_an_answer_that_trickles_is_cut_at_the_deadline_and_leaves_no_thread(part) -> None:
    """A Prometheus (or a proxy before it) that sends a byte now and then: the listing says
    it was late at its deadline, and the worker keeps no thread reading it afterwards (the
    worker lives on, one listing after another)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (Trickle,), {"part": part}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    netloc = f"127.0.0.1:{server.server_address[1]}"

    def readers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("trainwatch-prometheus")]

    try:
        with pytest.raises(PrometheusError, match="did not answer within"):
            query_all(Endpoint(f"http://{netloc}", 1.0), {"up": "up"}, 0.0, time.monotonic() + 1)
        gone = time.monotonic() + 30  # a margin: the reader ends at its next read
        while readers() and time.monotonic() < gone:
            time.sleep(0.05)
        assert not readers(), readers()
    finally:
        server.shutdown()
        server.server_close()
