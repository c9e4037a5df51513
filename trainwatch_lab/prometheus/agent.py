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
import gzip
import json
import os
import re
import secrets
import selectors
import socket
import socketserver
import threading
from collections.abc import Callable, Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from ..core.model import Sample
from ..core.probe import host_tag
from ..core.sampler import Sampler
from .metrics import SampleCollector, disk_counters

WILDCARDS = ("", "0.0.0.0", "::", "[::]")
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
    timeout = 300  # an idle keep-alive connection (a scraper gone) is dropped after this
    # headers and body leave in one write (flushed after each request), without Nagle's
    # delay: two small writes on a kept-alive connection would wait for a delayed ACK
    wbufsize = 256 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
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
    registry: CollectorRegistry

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
    ) -> None:
        self.sampler = sampler
        self.host, self.port = host, port
        self.file_sd_dir = file_sd_dir
        self.file_sd_timeout = file_sd_timeout
        self.file_sd: FileSD | None = None
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
        self._server.registry = self.registry
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
        with selectors.DefaultSelector() as selector:
            selector.register(server, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            try:
                while True:
                    ready = {key.fd for key, _ in selector.select()}
                    if wake in ready:
                        return
                    server._handle_request_noblock()  # accept, then a thread per connection
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
