"""The agent behind ``trainwatch-lab serve``: one Sampler, its latest sample on ``/metrics``.

One per node of a multi-node job. The sampler ticks on its own thread; a scrape formats the
sample its last tick finished (kept by a subscriber: one reference, swapped atomically) and
the disk counters read with it, so a scrape costs formatting only and never waits on a disk
or a dead mount. Requests are served by a small threaded HTTP/1.1 server (prometheus_client's
exposition in the text format, gzipped when asked).

``--file-sd DIR`` writes a Prometheus ``file_sd`` target file for this agent into DIR
(typically the job's shared directory, so one ``file_sd_configs`` glob finds every node),
atomically (temporary file + rename, so Prometheus never reads half of one), and removes it
on exit. DIR may be on a share that stops answering: each write and removal runs on its own
thread with a deadline, and a stuck one is abandoned, never waited for.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import re
import secrets
import select
import selectors
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from ..core.defaults import DEFAULTS
from ..core.model import Sample
from ..core.sampler import Sampler
from ..core.storage.probe import host_tag
from .metrics import SampleCollector, disk_counters
from .webconfig import WebConfig

WILDCARDS = ("", "0.0.0.0", "::", "[::]")
# accept() failing for want of descriptors or memory: wait and try again, never spin
ACCEPT_PAUSES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_PAUSE_MIN_S, ACCEPT_PAUSE_MAX_S = 0.005, 1.0
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
LANDING = b"""<html><head><title>trainwatch-lab</title></head><body>
<h1>trainwatch-lab agent</h1><p><a href="metrics">/metrics</a></p></body></html>
"""


def parse_listen(text: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``[::1]:PORT``, ``HOST`` or ``PORT`` -> (host, port); the
    host is "" for every interface. Raises ValueError with the one line to show."""
    raw = text.strip()
    if not raw:
        raise ValueError("--listen needs HOST:PORT, got an empty string")
    m = re.fullmatch(
        r"\[(?P<v6>[^\]]*)\](?::(?P<port6>\d*))?|(?P<host>[^:]*)(?::(?P<port>\d*))?", raw
    )
    if raw.isdigit():
        host, port = "", raw
    elif m is None:
        raise ValueError(
            f"--listen takes HOST:PORT (e.g. :{default_port}, 127.0.0.1:{default_port}, "
            f"[::1]:{default_port}); got {text!r}"
        )
    elif m.group("v6") is not None:
        host, port = m.group("v6"), m.group("port6")
    else:
        host, port = m.group("host"), m.group("port")
    number = int(port) if port else default_port
    if not 0 <= number <= 65535:
        raise ValueError(f"--listen: port {number} is out of range (0-65535)")
    return ("" if host in WILDCARDS else host), number


class _Handler(BaseHTTPRequestHandler):
    """``/metrics`` for Prometheus, a link to it on ``/``, 404 elsewhere.

    HTTP/1.1 with keep-alive, as Prometheus scrapes: one connection (and one thread) per
    scraper, reused scrape after scrape, instead of a connection and a thread per scrape.
    Always the text format 0.0.4, gzipped when the client accepts it (Prometheus does), as
    node_exporter answers by default: prometheus_client's OpenMetrics writer checks every
    character of every label and costs three times as much per scrape."""

    protocol_version = "HTTP/1.1"
    # headers and body leave in one write (flushed after each request), without Nagle's
    # delay: two small writes on a kept-alive connection would wait for a delayed ACK
    wbufsize = 256 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_header_timeout_s)
        if isinstance(self.connection, ssl.SSLSocket):  # on this thread, never accept()'s
            try:
                self.connection.do_handshake()
            except (OSError, ValueError):
                self.close_connection = True
                self.handshake_failed = True

    handshake_failed = False

    def handle(self) -> None:
        if not self.handshake_failed:
            super().handle()

    def handle_one_request(self) -> None:
        """Wait for the next request at most the idle timeout; then its request line and
        headers must come within the read-header timeout (a slow client cannot hold a
        connection, nor a thread, for long)."""
        self.connection.settimeout(self.server.idle_timeout_s)
        try:
            if not self.rfile.peek(1):
                self.close_connection = True
                return
        except (OSError, ValueError):
            self.close_connection = True
            return
        self.connection.settimeout(self.server.read_header_timeout_s)
        super().handle_one_request()

    def do_GET(self) -> None:
        web = self.server.web_config
        if web is not None and not web.allows(self.headers.get("Authorization")):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="trainwatch-lab"')
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            body = b"Unauthorized\n"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        path = urlsplit(self.path).path
        if path == "/metrics":
            body = generate_latest(self.server.registry)
            kind, gzipped = (
                CONTENT_TYPE_PLAIN_0_0_4,
                "gzip" in self.headers.get("Accept-Encoding", ""),
            )
            if gzipped:
                body = gzip.compress(body, compresslevel=1)  # 5 KiB: level 1 is as good
            self._answer(200, kind, body, gzipped)
        elif path == "/":
            self._answer(200, "text/html; charset=utf-8", LANDING)
        else:
            self._answer(404, "text/plain; charset=utf-8", b"Not found: see /metrics\n")

    def _answer(self, code: int, kind: str, body: bytes, gzipped: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # one line per scrape is noise
        pass


class _Server(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` of them: past that, a new
    connection gets a 503 and is closed at once (threads and descriptors stay bounded)."""

    registry: CollectorRegistry
    # the listen backlog: socketserver's 5 drops SYNs past it (a 1 s retransmit for the next
    # scrape while a burst is accepted); Go's listeners, node_exporter's, take somaxconn
    request_queue_size = socket.SOMAXCONN
    web_config: WebConfig | None = None
    max_connections = DEFAULTS.serve_max_requests
    read_header_timeout_s = DEFAULTS.serve_read_header_timeout_s
    idle_timeout_s = DEFAULTS.serve_idle_timeout_s
    accept_failed = False
    refused = 0  # connections answered 503 (tests, diagnostics)
    _slots: threading.BoundedSemaphore

    def get_request(self) -> tuple[Any, Any]:
        try:
            sock, address = super().get_request()
        except OSError as exc:
            self.accept_failed = exc.errno in ACCEPT_PAUSES
            raise
        self.accept_failed = False
        if self.web_config is not None and self.web_config.context is not None:
            # the handshake happens on the connection's thread (_Handler.setup)
            sock = self.web_config.context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        return sock, address

    def verify_request(self, request: Any, client_address: Any) -> bool:
        if self._slots.acquire(blocking=False):
            return True
        self.refused += 1
        with contextlib.suppress(OSError):
            request.settimeout(0)
            if not isinstance(request, ssl.SSLSocket):  # TLS: no handshake here, just close
                request.send(BUSY)
        return False

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer: nothing to report

    def server_bind(self) -> None:
        """Bind without HTTPServer's ``socket.getfqdn``: a reverse DNS lookup can hang on a
        node whose resolver is unreachable, and nothing here needs the name."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]


def _server_class(host: str, port: int) -> type[_Server]:
    """A threaded server of the address family ``host`` needs (IPv6 for ``::1``)."""
    family = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0][0]

    class Server(_Server):
        address_family = family

    return Server


class FileSD:
    """This agent's ``file_sd`` target file in a directory: written atomically, removed on
    exit, each within a deadline (the directory may be on a share that stops answering)."""

    def __init__(self, directory: str, target: str, labels: dict[str, str], port: int) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"trainwatch-{host_tag()}-{port}.json")
        self.body = json.dumps([{"targets": [target], "labels": labels}], indent=2) + "\n"

    def _write(self) -> None:
        tmp = os.path.join(
            self.directory, f".{os.path.basename(self.path)}.{secrets.token_hex(4)}.tmp"
        )
        try:
            with open(tmp, "x", encoding="utf-8") as fh:
                fh.write(self.body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def write(self, timeout: float) -> None:
        """Raises OSError (what the write raised, or ETIMEDOUT when the directory did not
        answer in time)."""
        _bounded(self._write, timeout, f"{self.directory} did not answer within {timeout:g} s")

    def remove(self, timeout: float) -> None:
        with contextlib.suppress(OSError):
            _bounded(self._remove, timeout, "")


def _bounded(fn: Callable[[], None], timeout: float, late: str) -> None:
    """``fn()`` on a daemon thread, waited for at most ``timeout`` seconds."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, name="trainwatch-file-sd", daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        raise TimeoutError(late)
    if box[0] is not None:
        raise box[0]


def target_labels() -> dict[str, str]:
    """Labels for every series of this target: the node's name, and the SLURM job when
    there is one (so a dashboard can pick one job's nodes)."""
    labels = {"hostname": socket.gethostname()}
    if os.environ.get("SLURM_JOB_ID"):
        labels["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    return labels


class Agent:
    """Serves ``sampler``'s latest sample on ``http://host:port/metrics``.

    ``start`` binds first (a port in use raises OSError before anything else starts), then
    writes the file_sd target, then starts the sampler; ``stop`` undoes it in reverse, each
    step bounded, so SIGTERM ends the agent within a second."""

    def __init__(
        self,
        sampler: Sampler,
        host: str,
        port: int,
        *,
        gpus: Collection[int] | None = None,
        process: bool = True,
        file_sd_dir: str | None = None,
        file_sd_timeout: float = 2.0,
        web_config: WebConfig | None = None,
        max_requests: int = DEFAULTS.serve_max_requests,
        read_header_timeout_s: float = DEFAULTS.serve_read_header_timeout_s,
        idle_timeout_s: float = DEFAULTS.serve_idle_timeout_s,
    ) -> None:
        self.sampler = sampler
        self.host, self.port = host, port
        self.file_sd_dir = file_sd_dir
        self.file_sd_timeout = file_sd_timeout
        self.file_sd: FileSD | None = None
        self.web_config = web_config
        self.limits = (max_requests, read_header_timeout_s, idle_timeout_s)
        self._latest: Sample | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._wake_w = -1
        self._unsubscribe: Callable[[], None] | None = None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(
            SampleCollector(self.latest, disk_counters(sampler), gpus, process=process)
        )
        self.registry = registry

    def latest(self) -> Sample | None:
        return self._latest

    def _keep(self, sample: Sample) -> None:
        self._latest = sample  # one reference: a scrape sees this sample or the one before

    def start(self) -> Agent:
        self._server = _server_class(self.host, self.port)((self.host, self.port), _Handler)
        server = self._server
        server.registry, server.web_config = self.registry, self.web_config
        server.max_connections, server.read_header_timeout_s, server.idle_timeout_s = self.limits
        server._slots = threading.BoundedSemaphore(server.max_connections)
        self.port = self._server.server_address[1]  # the real one when asked for port 0
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(
            target=self._serve,
            args=(self._server, self._wake_r),
            name="trainwatch-http",
            daemon=True,
        )
        self._thread.start()
        try:
            if self.file_sd_dir is not None:
                self.file_sd = FileSD(self.file_sd_dir, self.target, target_labels(), self.port)
                self.file_sd.write(self.file_sd_timeout)
            self._unsubscribe = self.sampler.subscribe(self._keep)
            self.sampler.start()
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _serve(server: _Server, wake: int) -> None:
        """socketserver's ``serve_forever`` without its polling: asleep until a client
        connects or ``stop`` writes to ``wake`` (polling 10 times a second would cost more
        CPU than the scrapes themselves)."""
        pause = ACCEPT_PAUSE_MIN_S
        with selectors.DefaultSelector() as selector:
            selector.register(server, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            try:
                while True:
                    ready = {key.fd for key, _ in selector.select()}
                    if wake in ready:
                        return
                    server._handle_request_noblock()  # accept, then a thread per connection
                    if server.accept_failed:  # EMFILE: the listener stays readable
                        if select.select([wake], [], [], pause)[0]:
                            return
                        pause = min(pause * 2, ACCEPT_PAUSE_MAX_S)
                    else:
                        pause = ACCEPT_PAUSE_MIN_S
            finally:
                os.close(wake)

    @property
    def target(self) -> str:
        """``host:port`` as Prometheus should scrape it: this node's name when listening on
        every interface."""
        host = self.host or socket.gethostname()
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def stop(self) -> None:
        if self.file_sd is not None:
            self.file_sd.remove(min(self.file_sd_timeout, 0.5))
        if self._server is not None and self._thread is not None:
            os.write(self._wake_w, b"x")  # the serving loop returns at once
            self._thread.join(0.5)
            self._server.server_close()
            os.close(self._wake_w)
            self._server = None
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.sampler.stop(timeout=0.3)  # a tick in a slow source ends on its own (daemon)
        self.sampler.close()

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
