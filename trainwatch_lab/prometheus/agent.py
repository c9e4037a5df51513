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
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Collection

from prometheus_client.registry import CollectorRegistry

from ..core.atomic_write import write_atomically
from ..core.model import Sample
from ..core.sampler import Sampler
from ..core.storage.probe import host_tag
from .agent_http import HTTPThread, Limits, serve
from .metrics import SampleCollector, disk_counters
from .webconfig import WebConfig

WILDCARDS = ("", "0.0.0.0", "::", "[::]")


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


class FileSD:
    """This agent's ``file_sd`` target file in a directory: written atomically, removed on
    exit, each within a deadline (the directory may be on a share that stops answering)."""

    def __init__(self, directory: str, target: str, labels: dict[str, str], port: int) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"trainwatch-{host_tag()}-{port}.json")
        self.body = json.dumps([{"targets": [target], "labels": labels}], indent=2) + "\n"

    def _write(self) -> None:
        write_atomically(self.path, self.body.encode())

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
        limits: Limits | None = None,
    ) -> None:
        self.sampler = sampler
        self.host, self.port = host, port
        self.file_sd_dir = file_sd_dir
        self.file_sd_timeout = file_sd_timeout
        self.file_sd: FileSD | None = None
        self.web_config = web_config
        self.limits = limits or Limits()
        self._latest: Sample | None = None
        self._http: HTTPThread | None = None
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
        self._http, self.port = serve(
            self.host, self.port, self.registry, self.web_config, self.limits
        )
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

    @property
    def http(self) -> HTTPThread | None:
        """The server (its counts: tests, diagnostics), while serving."""
        return self._http

    @property
    def target(self) -> str:
        """``host:port`` as Prometheus should scrape it: this node's name when listening on
        every interface."""
        host = self.host or socket.gethostname()
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def stop(self) -> None:
        if self.file_sd is not None:
            self.file_sd.remove(min(self.file_sd_timeout, 0.5))
        if self._http is not None:
            self._http.stop(0.5)
            self._http = None
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.sampler.stop(timeout=0.3)  # a tick in a slow source ends on its own (daemon)
        self.sampler.close()

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
