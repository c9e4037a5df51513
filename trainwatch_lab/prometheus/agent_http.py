"""The agent's HTTP server: tornado's HTTP/1.1 server on a thread and event loop of its own.

Why tornado (a dependency already) and not a server of our own: it parses requests (a GET's
body is read as its body, never as the next request), keeps every connection on one event
loop (an idle or slow client costs a descriptor, not a thread or a slot), and bounds the
header (size, and one deadline for all of it) and the body. On top of it, as node_exporter
with exporter-toolkit: a limit on requests in flight (503 past it), TLS and basic auth from
the web config, bcrypt off the loop on one thread with a bounded queue (a remembered password
never waits behind a flood of wrong ones), and accept() pausing, not spinning, on EMFILE.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gzip
import logging
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry
from tornado import netutil
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.iostream import IOStream, SSLIOStream
from tornado.web import Application, RequestHandler

from ..core.defaults import DEFAULTS
from .basicauth import credentials
from .webconfig import WebConfig

# accept() failing for want of descriptors or memory: wait and try again, never spin
ACCEPT_PAUSES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_PAUSE_MIN_S, ACCEPT_PAUSE_MAX_S = 0.005, 1.0
ACCEPTS_PER_WAKE = 64  # then the loop serves the connections it has
CLOSE_WAIT_S = 0.3  # for open connections to close on stop
LANDING = b"""<html><head><title>trainwatch-lab</title></head><body>
<h1>trainwatch-lab agent</h1><p><a href="metrics">/metrics</a></p></body></html>
"""


@dataclass(frozen=True)
class Limits:
    """What one client may cost the agent (core.defaults says why each is what it is)."""

    max_requests: int = DEFAULTS.serve_max_requests
    idle_timeout_s: float = DEFAULTS.serve_idle_timeout_s
    body_timeout_s: float = DEFAULTS.serve_body_timeout_s
    max_header_bytes: int = DEFAULTS.serve_max_header_bytes
    max_body_bytes: int = DEFAULTS.serve_max_body_bytes
    auth_queue: int = DEFAULTS.serve_auth_queue


class _Site:
    """What every request of one server shares: the registry, the web config, the limits
    and the counts of requests in flight and waiting for bcrypt (touched on the loop only)."""

    def __init__(self, registry: CollectorRegistry, web: WebConfig | None, limits: Limits) -> None:
        self.registry, self.web, self.limits = registry, web, limits
        self.in_flight = 0
        self.auth_waiting = 0
        self.refused = 0  # requests answered 503 (tests, diagnostics)
        self.scrape_pool = ThreadPoolExecutor(
            max_workers=min(4, limits.max_requests), thread_name_prefix="trainwatch-scrape"
        )
        # one bcrypt at a time, as exporter-toolkit's mutex: a flood costs one core at most
        self.bcrypt_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainwatch-auth")

    def close(self) -> None:
        self.scrape_pool.shutdown(wait=False, cancel_futures=True)
        self.bcrypt_pool.shutdown(wait=False, cancel_futures=True)


class _Handler(RequestHandler):
    """``/metrics`` for Prometheus, a link to it on ``/``, 404 elsewhere; behind the web
    config's client-certificate SANs and basic auth, and the limit on requests in flight."""

    @property
    def site(self) -> _Site:
        return self.application.settings["site"]

    def set_default_headers(self) -> None:
        self.clear_header("Server")  # no version to look up vulnerabilities by
        web = self.site.web
        for name, value in (web.headers if web is not None else {}).items():
            self.set_header(name, value)

    def compute_etag(self) -> None:
        return None  # a hash of every scrape's body for nothing

    async def prepare(self) -> None:
        web = self.site.web
        if web is None:
            return
        if web.allowed_sans and not web.client_allowed(self.request.get_ssl_certificate()):
            self._plain(401, b"Unauthorized: client certificate\n")
            return
        if web.auth is None or self.request.path in web.excluded_paths:
            return
        creds = credentials(self.request.headers.get("Authorization"))
        ok = web.auth.known(*creds) if creds is not None else False
        if ok is None:
            if self.site.auth_waiting >= self.site.limits.auth_queue:
                self._busy()
                return
            self.site.auth_waiting += 1
            try:
                loop = asyncio.get_running_loop()
                ok = await loop.run_in_executor(self.site.bcrypt_pool, web.auth.check, *creds)
            finally:
                self.site.auth_waiting -= 1
        if not ok:
            self.set_header("WWW-Authenticate", 'Basic realm="trainwatch-lab"')
            self._plain(401, b"Unauthorized\n")

    async def get(self) -> None:
        path = self.request.path
        if path == "/":
            self._answer(200, "text/html; charset=utf-8", LANDING)
            return
        if path != "/metrics":
            self._answer(404, "text/plain; charset=utf-8", b"Not found: see /metrics\n")
            return
        site = self.site
        if site.in_flight >= site.limits.max_requests:
            self._busy()
            return
        site.in_flight += 1
        try:
            gzipped = "gzip" in self.request.headers.get("Accept-Encoding", "")
            loop = asyncio.get_running_loop()
            body = await loop.run_in_executor(site.scrape_pool, _exposition, site.registry, gzipped)
        finally:
            site.in_flight -= 1
        if gzipped:
            self.set_header("Content-Encoding", "gzip")
        self._answer(200, CONTENT_TYPE_PLAIN_0_0_4, body)

    def _busy(self) -> None:
        self.site.refused += 1
        self._plain(503, b"Too many requests in flight; try again\n")

    def _plain(self, code: int, body: bytes) -> None:
        self._answer(code, "text/plain; charset=utf-8", body)

    def _answer(self, code: int, kind: str, body: bytes) -> None:
        self.set_status(code)
        self.set_header("Content-Type", kind)
        self.finish(body)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{status_code} {self._reason}\n".encode())

    def log_exception(self, *args: Any) -> None:
        pass  # a client that went away mid-answer: nothing to report


def _unlogged(handler: RequestHandler) -> None:
    pass  # one line per scrape is noise


def _exposition(registry: CollectorRegistry, gzipped: bool) -> bytes:
    """The text format 0.0.4, as node_exporter answers by default (prometheus_client's
    OpenMetrics writer costs three times as much per scrape), gzipped when asked (5 KiB:
    level 1 is as good)."""
    body = generate_latest(registry)
    return gzip.compress(body, compresslevel=1) if gzipped else body


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` ("" every interface) and ``port`` (0: a free one),
    bound now (a port in use raises OSError here), the backlog Go's listeners take."""
    return netutil.bind_sockets(port, address=host or None, backlog=socket.SOMAXCONN)


class HTTPThread:
    """The server on its own thread and event loop, serving ``sockets`` until ``stop``."""

    def __init__(
        self,
        sockets: list[socket.socket],
        registry: CollectorRegistry,
        web: WebConfig | None,
        limits: Limits,
    ) -> None:
        self.sockets = sockets
        self.site = _Site(registry, web, limits)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ioloop: IOLoop | None = None
        self._failed: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainwatch-http", daemon=True)

    def start(self) -> None:
        """Serve from now on; raises what setting the server up raised."""
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed

    async def _setup(self) -> HTTPServer:
        site = self.site
        # one line a request, one an aborted handshake (tornado's logs, which reach stderr
        # through logging's last resort): a flood would flood the journal as well
        logging.getLogger("tornado.general").setLevel(logging.CRITICAL)
        app = Application(
            [(r"/.*", _Handler)], compress_response=False, site=site, log_function=_unlogged
        )
        server = HTTPServer(
            app,
            ssl_options=site.web.context if site.web is not None else None,
            idle_connection_timeout=site.limits.idle_timeout_s,
            body_timeout=site.limits.body_timeout_s,
            max_header_size=site.limits.max_header_bytes,
            max_body_size=site.limits.max_body_bytes,
            decompress_request=False,
        )
        loop = self._ioloop = IOLoop.current()
        for sock in self.sockets:
            _Acceptor(loop, sock, server, site.web).resume()
        return server

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(self._setup())
        except BaseException as exc:
            self._failed = exc
            self._ready.set()
            self._close(loop, None)
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._close(loop, server)

    def _close(self, loop: asyncio.AbstractEventLoop, server: HTTPServer | None) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError, ValueError):
                loop.remove_reader(sock.fileno())
            sock.close()
        if server is not None:
            with contextlib.suppress(Exception):
                loop.run_until_complete(
                    asyncio.wait_for(server.close_all_connections(), CLOSE_WAIT_S)
                )
        if self._ioloop is not None:
            self._ioloop.close()  # and the asyncio loop under it
        else:
            loop.close()
        self.site.close()

    def stop(self, timeout: float = 0.5) -> None:
        """Stop serving (the listeners closed, every connection with them) within
        ``timeout``; the thread is a daemon, so one that is late is never waited for."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout)


class _Acceptor:
    """Accepts connections for ``server`` when ``sock`` is readable: tornado's own accept
    handler raises on EMFILE with the listener still readable (a busy loop); this one stops
    listening and tries again after a pause, doubling from 5 ms to 1 s, as Go does."""

    def __init__(self, loop: IOLoop, sock: socket.socket, server: HTTPServer, web: Any) -> None:
        self.loop, self.sock, self.server = loop, sock, server
        self.context: ssl.SSLContext | None = web.context if web is not None else None
        self.pause = ACCEPT_PAUSE_MIN_S
        sock.setblocking(False)

    def resume(self) -> None:
        self.loop.add_handler(self.sock, self._ready, IOLoop.READ)

    def _ready(self, fd: Any, events: int) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                conn, address = self.sock.accept()
            except BlockingIOError:
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in ACCEPT_PAUSES:
                    raise
                self.loop.remove_handler(self.sock)
                self.loop.call_later(self.pause, self.resume)
                self.pause = min(self.pause * 2, ACCEPT_PAUSE_MAX_S)
                return
            self.pause = ACCEPT_PAUSE_MIN_S
            self._serve(conn, address)

    def _serve(self, conn: socket.socket, address: Any) -> None:
        try:
            if self.context is not None:  # the handshake happens on the loop, non-blocking
                conn = self.context.wrap_socket(
                    conn, server_side=True, do_handshake_on_connect=False
                )
                stream: IOStream = SSLIOStream(conn)
            else:
                stream = IOStream(conn)
            stream.set_nodelay(True)  # headers and body in one write, no Nagle delay
        except OSError:  # gone before it was served (a port scan)
            conn.close()
            return
        self.server.handle_stream(stream, address)


def serve(
    host: str, port: int, registry: CollectorRegistry, web: WebConfig | None, limits: Limits
) -> tuple[HTTPThread, int]:
    """A started server and the port it listens on (the real one when asked for 0)."""
    sockets = bind(host, port)
    thread = HTTPThread(sockets, registry, web, limits)
    thread.start()
    return thread, sockets[0].getsockname()[1]
