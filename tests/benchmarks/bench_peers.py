"""Row 2: trainwatch against the tools people use today, same workload, same run, side by side.

All watchers run at the same time for ``cfg.peers_s`` seconds at 1 s while one storage workload
writes and reads; each one's process CPU (its whole process tree, each process by its CPU
clock, so threads that lived between two polls count too) is measured:

- ``iostat -x 1`` (sysstat), output to /dev/null;
- ``glances -q --export csv -t 1`` (quiet mode, CSV export);
- jupyter-resource-usage: a Jupyter server from the peers venv, ``/api/metrics/v1`` polled at
  1 s with the token (``track_cpu_percent`` on, as people enable it to see CPU);
- trainwatch sampler: ``make_sampler([workload]).start()`` alone in a Python process;
- trainwatch server extension: a Jupyter server with ``trainwatch_lab`` enabled, one WebSocket
  client on ``/trainwatch-lab/api/stream``, the workload directory added as a watched path;
- a bare Jupyter server, as the reference for what a server costs doing nothing.

glances and jupyter-resource-usage live in a separate venv (default /tmp/twbench-peers, see
README.md) so they do not pollute this project's dependencies.

    python -m tests.benchmarks.run --only peers [--quick]
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .common import (
    PEERS_VENV,
    Config,
    Row,
    Server,
    TreeCpu,
    env_with_repo,
    guarded,
    judged,
    jupyter_server,
    nbytes,
    need_attr,
    skipped,
    stop_process,
    storage_workload,
)

GROUP = "2 peers"

SAMPLER_SCRIPT = r"""
import sys, time
from trainwatch_lab.monitor import make_sampler
if sys.argv[2] == "disks":  # iostat's scope: /proc/diskstats only, no paths/process/advice
    from trainwatch_lab.core.storage.diskstats import DiskStatsSource
    from trainwatch_lab.core.sampler import Sampler
    sampler = Sampler([DiskStatsSource()], interval=1.0)
else:
    sampler = make_sampler([sys.argv[1]], interval=1.0)
sampler.start()
print("started", flush=True)
while True:
    time.sleep(3600)
"""


@dataclass
class Watcher:
    name: str
    pid: int
    note: str = ""
    check: Callable[[], str] | None = None  # proves it really worked during the run
    cpu: TreeCpu | None = None
    cpu_s: float = 0.0
    extra: dict = field(default_factory=dict)


class Poller(threading.Thread):
    """Calls ``fn`` every second until stopped; counts successes (a client, not measured)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.ok = 0
        self.errors: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            try:
                self.fn()
                self.ok += 1
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            next_at += 1.0
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))


class WsClient(threading.Thread):
    """One WebSocket client reading the trainwatch stream (like one open panel)."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        import websocket

        url = server.url.replace("http://", "ws://") + "trainwatch-lab/api/stream"
        self.ws = websocket.create_connection(
            url, header=[f"Authorization: token {server.token}"], timeout=10
        )
        self.messages = 0
        self.bytes = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                msg = self.ws.recv()
            except Exception:
                if self.stop_event.is_set():
                    return
                time.sleep(0.1)
                continue
            self.messages += 1
            self.bytes += nbytes(msg)

    def close(self) -> None:
        self.stop_event.set()
        with contextlib.suppress(Exception):
            self.ws.close()


def add_watched_path(server: Server, path: str) -> None:
    """POST the workload directory to the panel's watched paths (as the panel does)."""
    req = urllib.request.Request(
        server.url + "trainwatch-lab/api/paths",
        data=json.dumps({"path": path}).encode(),
        method="POST",
        headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


@contextlib.contextmanager
def started(args: list[str], **kw) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(args, start_new_session=True, **kw)
    try:
        yield proc
    finally:
        stop_process(proc)


def measure(cfg: Config) -> list[Row]:
    rows: list[Row] = []
    watchers: list[Watcher] = []
    peers_python = PEERS_VENV / "bin" / "python"
    glances = PEERS_VENV / "bin" / "glances"
    make_sampler, sampler_why = need_attr("trainwatch_lab.monitor", "make_sampler")
    server_ext, server_why = need_attr("trainwatch_lab.server", "_jupyter_server_extension_points")
    if server_ext is None:
        # the package root declares the entry point; the server module must exist for it
        server_ext, server_why = need_attr("trainwatch_lab.server.extension", "__name__")

    tmp = Path(tempfile.mkdtemp(prefix="twbench-peers-"))
    with contextlib.ExitStack() as stack, storage_workload() as work:
        stack.callback(shutil.rmtree, tmp, True)
        # iostat
        if shutil.which("iostat"):
            p = stack.enter_context(started(["iostat", "-x", "1"], stdout=subprocess.DEVNULL))
            watchers.append(Watcher("`iostat -x 1`", p.pid))
        else:
            rows.append(
                skipped(GROUP, "`iostat -x 1`", "install sysstat (apt-get install sysstat)")
            )
        # glances
        if glances.exists():
            csv_path = tmp / "glances.csv"
            p = stack.enter_context(
                started(
                    [
                        str(glances),
                        "-q",
                        "--export",
                        "csv",
                        "--export-csv-file",
                        str(csv_path),
                        "-t",
                        "1",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

            def glances_check(path: Path = csv_path) -> str:
                lines = path.read_text().count("\n") if path.exists() else 0
                return f"{lines} CSV lines exported"

            watchers.append(Watcher("`glances -q --export csv -t 1`", p.pid, check=glances_check))
        else:
            rows.append(skipped(GROUP, "glances", f"no {glances}; see README (peers venv)"))
        # jupyter-resource-usage
        if peers_python.exists():
            srv = stack.enter_context(
                jupyter_server(
                    str(peers_python),
                    extra_args=["--ResourceUseDisplay.track_cpu_percent=True"],
                )
            )
            poller = Poller(lambda s=srv: s.get_json("api/metrics/v1"))
            poller.start()
            stack.callback(poller.stop_event.set)
            watchers.append(
                Watcher(
                    "jupyter-resource-usage server, /api/metrics/v1 polled at 1 s",
                    srv.proc.pid,
                    check=lambda p=poller: f"{p.ok} polls ok, {len(p.errors)} errors",
                )
            )
        else:
            rows.append(skipped(GROUP, "jupyter-resource-usage", f"no {peers_python}; see README"))
        # trainwatch sampler alone, and reduced to iostat's scope
        if make_sampler is not None:
            for mode, label in (
                ("full", "trainwatch sampler (own process, 1 s, workload dir watched)"),
                ("disks", "trainwatch disk source only (iostat's scope)"),
            ):
                p = stack.enter_context(
                    started(
                        [sys.executable, "-c", SAMPLER_SCRIPT, str(work), mode],
                        env=env_with_repo(),
                        stdout=subprocess.DEVNULL,
                    )
                )
                watchers.append(Watcher(label, p.pid))
        else:
            rows.append(skipped(GROUP, "trainwatch sampler", sampler_why or ""))
        # trainwatch server extension + one WebSocket client
        if server_ext is not None:
            srv = stack.enter_context(jupyter_server(extensions={"trainwatch_lab": True}))
            try:
                add_watched_path(srv, str(work))
                path_note = "workload dir added"
            except Exception as exc:
                path_note = f"adding the workload dir failed ({exc}); root dir watched"
            client = WsClient(srv)
            client.start()
            stack.callback(client.close)
            watchers.append(
                Watcher(
                    "trainwatch server extension, one WebSocket client",
                    srv.proc.pid,
                    note=path_note,
                    check=lambda c=client: f"{c.messages} messages, {c.bytes} bytes",
                )
            )
        else:
            rows.append(skipped(GROUP, "trainwatch server extension", server_why or ""))
        # reference: what an idle Jupyter server costs
        srv = stack.enter_context(jupyter_server(extensions={"trainwatch_lab": False}))
        watchers.append(Watcher("(reference) bare jupyter_server, idle", srv.proc.pid))

        time.sleep(5.0)  # let every watcher finish starting up
        for w in watchers:
            w.cpu = TreeCpu(w.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < cfg.peers_s:
            time.sleep(1.0)
            for w in watchers:
                assert w.cpu is not None
                w.cpu_s = w.cpu.poll()
                w.extra.setdefault("timeline", []).append(w.cpu_s)
        wall = time.monotonic() - t0
        checks = {w.name: (w.check() if w.check else "") for w in watchers}

    pct = {w.name: 100 * w.cpu_s / wall for w in watchers}
    for w in watchers:
        rows.append(
            Row(
                GROUP,
                f"{w.name}: process CPU (% of one core)",
                f"{pct[w.name]:.3f} %",
                note="; ".join(filter(None, [w.note, checks[w.name]])),
                data={"cpu_pct": pct[w.name], "wall_s": wall},
            )
        )
    tw = next((pct[w.name] for w in watchers if w.name.startswith("trainwatch sampler")), None)
    tw_disks = next((pct[w.name] for w in watchers if "disk source only" in w.name), None)
    gl = next((pct[w.name] for w in watchers if "glances" in w.name), None)
    io = next((pct[w.name] for w in watchers if "iostat" in w.name), None)
    if tw is not None and gl is not None:
        ratio = tw / gl if gl else float("inf")
        rows.append(
            Row(
                GROUP,
                "trainwatch sampler / glances CPU",
                f"{ratio:.2f}x",
                "< 1x",
                judged(ratio < 1),
            )
        )
    if tw is not None and io is not None:
        ratio = tw / io if io else float("inf")
        sampler = next(w for w in watchers if w.name.startswith("trainwatch sampler"))
        iostat = next(w for w in watchers if "iostat" in w.name)
        windows = window_ratios(sampler.extra["timeline"], iostat.extra["timeline"])
        rows.append(
            Row(
                GROUP,
                "trainwatch sampler / iostat CPU",
                f"{ratio:.2f}x",
                "<= 2x",
                judged(ratio <= 2),
                note=(
                    "per 20 s window: " + ", ".join(f"{r:.2f}x" for r in windows) if windows else ""
                ),
                data={"windows": windows},
            )
        )
    if tw_disks is not None and io is not None:
        ratio = tw_disks / io if io else float("inf")
        rows.append(
            Row(
                GROUP,
                "trainwatch disk source only / iostat CPU (same scope)",
                f"{ratio:.2f}x",
                "<= 2x",
                judged(ratio <= 2),
            )
        )
    return rows


def window_ratios(ours: list[float], theirs: list[float], seconds: int = 20) -> list[float]:
    """The ratio over consecutive windows of the 1 s cumulative CPU readings: how much of
    the overall ratio is noise of a shared machine."""
    out = []
    for start in range(0, min(len(ours), len(theirs)) - seconds + 1, seconds):
        a0 = ours[start - 1] if start else 0.0
        b0 = theirs[start - 1] if start else 0.0
        mine, peer = ours[start + seconds - 1] - a0, theirs[start + seconds - 1] - b0
        if peer > 0:
            out.append(mine / peer)
    return out


def run(cfg: Config) -> list[Row]:
    return guarded(GROUP, "peers side by side", lambda: measure(cfg))
