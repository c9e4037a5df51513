"""A real IPython kernel driven through jupyter_client, with an iopub wire-byte counter.

Rows 3, 4 and 5 use it: the kernel runs ``%trainwatch`` exactly as in a notebook; nothing
stands in for the widget. A second, raw ZMQ SUB socket on the kernel's iopub port sees every
message as bytes on the wire, which is what the Jupyter server forwards to the browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .common import env_with_repo

# finds the running Sampler the magic created, whatever the magic module calls it
FIND_SAMPLER = """
import gc as _gc
from trainwatch_lab.core.sampler import Sampler as _S
_tw = [o for o in _gc.get_objects() if isinstance(o, _S) and o.running]
assert len(_tw) == 1, f"expected one running sampler, found {len(_tw)}"
_tw_sampler = _tw[0]
del _tw
"""


# gives the running sampler a history as after an hour at its interval: copies of its latest
# sample one interval apart, ending now, in a fresh History of the same capacity (appending
# old timestamps to the live one would break its time order); the widget then shows full
# windows, so its traffic is the steady-state traffic
PREFILL_HISTORY = """
import dataclasses as _dc, time as _time
from trainwatch_lab.core.history import History as _H
_tw_sampler.stop()
_old = _tw_sampler.history
_new = _H(capacity=_old.capacity, max_series=_old.max_series)
_now, _dt = _time.time(), _tw_sampler.interval
for _i in range(_old.capacity):
    _new.append(_dc.replace(_old.latest, t=_now - (_old.capacity - _i) * _dt))
_tw_sampler.history = _new
_tw_sampler.start()
del _old, _new
"""


@dataclass
class Reply:
    status: str
    stdout: str
    error: str
    messages: list[tuple[float, dict]] = field(default_factory=list)


class KernelSession:
    def __init__(self, km: Any, kc: Any) -> None:
        self.km = km
        self.kc = kc

    def execute(
        self,
        code: str,
        timeout: float = 120.0,
        on_message: Callable[[float, dict], None] | None = None,
    ) -> Reply:
        """Run ``code``; every iopub message of it is timestamped (perf_counter) as it arrives."""
        messages: list[tuple[float, dict]] = []
        out: list[str] = []
        err: list[str] = []

        def hook(msg: dict) -> None:
            now = time.perf_counter()
            messages.append((now, msg))
            if on_message is not None:
                on_message(now, msg)
            kind = msg["header"]["msg_type"]
            content = msg["content"]
            if kind == "stream":
                (out if content.get("name") == "stdout" else err).append(content["text"])
            elif kind == "error":
                err.append("\n".join(content.get("traceback", [])) or content.get("evalue", ""))

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        content = reply["content"]
        if content["status"] != "ok":
            err.append(f"{content.get('ename')}: {content.get('evalue')}")
        return Reply(content["status"], "".join(out), "".join(err), messages)

    def check(self, code: str, timeout: float = 120.0) -> Reply:
        reply = self.execute(code, timeout)
        if reply.status != "ok":
            raise RuntimeError(f"kernel error running {code.splitlines()[0]!r}: {reply.error}")
        return reply

    def drain(self, seconds: float, on_message: Callable[[float, dict], None]) -> None:
        """Read iopub for ``seconds`` while the kernel is idle (the sampler thread still talks)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                msg = self.kc.get_iopub_msg(timeout=min(left, 0.5))
            except Exception:
                continue
            on_message(time.perf_counter(), msg)


@contextlib.contextmanager
def kernel_session(**env: str) -> Iterator[KernelSession]:
    from jupyter_client.manager import start_new_kernel

    full_env = env_with_repo(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **env)
    km, kc = start_new_kernel(kernel_name="python3", env=full_env, cwd=os.getcwd())
    try:
        yield KernelSession(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class IopubBytes(threading.Thread):
    """A raw SUB socket on the kernel's iopub: counts wire bytes per msg_type."""

    def __init__(self, session: KernelSession) -> None:
        super().__init__(daemon=True)
        import zmq

        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        info = session.km.get_connection_info()
        self.sock.connect(f"{info['transport']}://{info['ip']}:{info['iopub_port']}")
        self.sock.setsockopt(zmq.RCVTIMEO, 200)
        self.lock = threading.Lock()
        self.bytes: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        import zmq

        while not self.stop_event.is_set():
            try:
                frames = self.sock.recv_multipart()
            except zmq.Again:
                continue
            try:
                i = frames.index(b"<IDS|MSG>")
                kind = json.loads(frames[i + 2])["msg_type"]
            except (ValueError, IndexError, KeyError):
                kind = "?"
            with self.lock:
                self.bytes[kind] = self.bytes.get(kind, 0) + sum(len(f) for f in frames)
                self.count[kind] = self.count.get(kind, 0) + 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        with self.lock:
            return dict(self.bytes), dict(self.count)

    def close(self) -> None:
        self.stop_event.set()
        self.join(2)
        self.sock.close(0)
        self.ctx.term()
