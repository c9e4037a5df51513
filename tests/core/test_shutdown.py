"""Shutdown is quiet: no thread of ours ends with a traceback when monitoring stops (unload,
a closed source, interpreter exit) while checkpoint scans and probes are in flight.

Seen in CI: ``Exception in thread trainwatch-scan``: the guard closed the helper's pipes
under a request, whose EBADF/ValueError escaped ``MountGuard.call`` (and then
``stderr_tail``) into the scan thread. Real helper processes throughout; the racy parts are
repeated with a tiny thread switch interval so that they fail reliably without the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.guard import helper as guard_helper
from trainwatch_lab.core.guard.guard import (
    PROBE_LANE,
    MountGuard,
    MountUnresponsive,
    WorkerFailed,
    WorkerUnavailable,
)
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.paths import look as path_look
from trainwatch_lab.core.paths import source as paths_source
from trainwatch_lab.core.paths import watch as path_watch
from trainwatch_lab.core.paths.source import PathsSource
from trainwatch_lab.core.sampler import Sampler

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = (MountUnresponsive, WorkerUnavailable, WorkerFailed)
# a probe and a checkpoint scan every tick: always one of each in flight
BUSY = replace(
    DEFAULTS,
    mount_timeout_s=2.0,
    probe_writes=2,
    probe_budget_s=0.5,
    probe_every_s=0.0,
    local_probe_every_s=0.0,
    checkpoint_scan_budget_s=0.2,
)


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """``threading.excepthook`` replaced by a recorder: "name: exception" for each thread of
    ours (named ``trainwatch-*``) that ended with one; others go to the usual hook."""
    failures: list[str] = []
    usual = threading.excepthook

    def record(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        if name.startswith("trainwatch"):
            failures.append(f"{name}: {args.exc_type.__name__}: {args.exc_value}")
        else:
            usual(args)

    monkeypatch.setattr(threading, "excepthook", record)
    yield failures


@pytest.fixture
def racy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Switch threads every 10 µs: a close lands inside a call's few bytecodes far more often."""
    usual = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(usual)


def checkpoint_dirs(root: Path, n: int) -> list[str]:
    """``n`` run directories of Lightning-style checkpoints and a symlink to each: a
    symlinked path is looked at and scanned through the guard's helpers, the directory
    itself from our own thread (a local disk), so both kinds of scan run."""
    keys = []
    for i in range(n):
        run = root / f"run{i}"
        run.mkdir()
        for step in range(3):
            (run / f"epoch={step}-step={step * 100}.ckpt").write_bytes(b"x" * 1000)
        link = root / f"link{i}"
        link.symlink_to(run)
        keys += [str(run), str(link)]
    return keys


def our_threads(*prefixes: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefixes)]


def test_calls_racing_the_guard_close_meet_only_its_documented_exceptions(
    thread_failures: list[str], racy: None
) -> None:
    """Callers that handle what ``MountGuard.call`` documents (as every caller of ours does)
    never see anything else when the guard closes under them: before the fix, EBADF from
    the closed pipe escaped as an OSError (the mount's error, to a caller) in almost every
    round, and ValueError("I/O operation on closed file") now and then."""
    for _ in range(10):
        g = MountGuard(timeout_s=5.0)
        for key in ("/a", "/b"):
            g.call(key, "ping")
        stop = threading.Event()

        def work(key: str, lane: str, g: MountGuard = g, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                with contextlib.suppress(*DOCUMENTED):
                    g.call(key, "sleep", lane=lane, seconds=0.001)

        threads = [
            threading.Thread(target=work, args=(key, lane), name=f"trainwatch-test {key} {lane}")
            for key in ("/a", "/b")
            for lane in ("main", PROBE_LANE, path_look.SCAN_LANE)
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        time.sleep(random.uniform(0.05, 0.2))
        g.close()
        time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
        assert thread_failures == []


def test_closing_a_source_with_scans_and_probes_in_flight_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_failures: list[str]
) -> None:
    """The mount's helper frozen (SIGSTOP) with a scan and a probe request in flight; the
    guard is closed under the running source (atexit does that), then the helper goes on and
    gets its SIGTERM. The threads end quietly, and the probe reports the guard's exception,
    not EBADF of our closed pipe (before the fix: "Bad file descriptor", read as the mount's
    error). One helper serves the look, the scan and the probe (issue 33): it is frozen as
    the tick's look has answered, when the first scan or probe call starts."""
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    monkeypatch.setattr(path_watch, "PROBE_RETRY_S", 0.0)
    link = checkpoint_dirs(tmp_path, 1)[1]  # looked at, scanned and probed by helpers

    def seen(src: PathsSource) -> bool:
        sample = Sample(t=time.time())
        src.collect(sample)
        state = sample.paths[link]
        return state.checkpoints is not None and state.probe is not None

    def one_round() -> None:
        g = MountGuard(BUSY.mount_timeout_s, inline=False)  # helpers even for a local path
        src = PathsSource([link], defaults=BUSY, guard=g)
        frozen: list[int] = []
        try:
            assert wait_until(lambda: seen(src))
            assert len(g.live_pids()) == 1  # the look, the scan and the probe lanes
            busy = (f"trainwatch-scan {link}", f"trainwatch-probe {link}")
            # the next tick starts both anew, so both requests go to the frozen helper
            assert wait_until(lambda: not our_threads(*busy))
            call = g.call

            def freezing(key: str, op: str, **kw: Any) -> Any:
                if op in ("probe", "scan_checkpoints") and not frozen:
                    frozen.extend(g.live_pids())
                    for pid in frozen:
                        os.kill(pid, signal.SIGSTOP)
                return call(key, op, **kw)

            g.call = freezing  # type: ignore[method-assign]
            src.collect(Sample(t=time.time()))  # starts a scan and a probe
            assert wait_until(lambda: len(our_threads(*busy)) == 2)
            time.sleep(0.2)  # both requests are written and wait for their answers
            g.close()
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)  # they get close()'s SIGTERM now, and exit
            frozen = []
            assert wait_until(lambda: not our_threads(*busy), 10)
            sample = Sample(t=time.time())
            src.collect(sample)  # the look fails now, so no new probe replaces the last one
            probe = sample.paths[link].probe
            assert probe is not None
            # the guard's own words, never EBADF of our closed pipe: "during the call" when
            # the request was written before close(), "is closed" when a loaded machine let
            # close() run first (the 0.2 s above is no promise)
            assert probe.error in ("guard was closed during the call", "guard is closed"), probe
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            src.close()
            g.close()

    for _ in range(3):
        one_round()
    assert thread_failures == []


class _CloseInside:
    """Stands in for ``json`` in core.guard.helper: the first request for ``op`` closes the guard
    between the call's checks and its write, where the race of the CI run landed."""

    def __init__(self, guard: MountGuard, op: str) -> None:
        self.guard, self.op, self.fired = guard, op, threading.Event()

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if isinstance(obj, dict) and obj.get("op") == self.op and not self.fired.is_set():
            self.fired.set()
            self.guard.close()
        return json.dumps(obj, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


@pytest.mark.parametrize("op", ["scan_checkpoints", "probe"])
def test_a_close_landing_inside_a_call_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_failures: list[str], op: str
) -> None:
    """The exact moment of the CI run, made certain: the guard closes while a scan (or a
    probe) thread is inside ``MountGuard.call``. Before the fix the thread died with
    ValueError("I/O operation on closed file")."""
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    keys = checkpoint_dirs(tmp_path, 1)
    g = MountGuard(BUSY.mount_timeout_s, inline=False)  # helpers even for a local path
    closer = _CloseInside(g, op)
    monkeypatch.setattr(guard_helper, "json", closer)
    src = PathsSource([keys[1]], defaults=BUSY, guard=g)  # the link: scanned by the helper
    try:
        assert wait_until(lambda: closer.fired.is_set() or src.collect(Sample(t=time.time())))
        assert wait_until(lambda: not our_threads("trainwatch-scan", "trainwatch-probe"), 10)
    finally:
        src.close()
        g.close()
    assert thread_failures == []


SHUTDOWN_ERROR = "can't create new thread at interpreter shutdown"


def test_a_scan_thread_meeting_the_unexpected_is_quiet_only_once_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_failures: list[str]
) -> None:
    """What a thread meets in an interpreter that is going away cannot all be listed; once
    the source or its guard is closed, a scan ends quietly whatever it met. While they
    run, a bug still shows."""
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    link = checkpoint_dirs(tmp_path, 1)[1]  # scanned through the helper

    def one_round(close: str | None) -> None:
        g = MountGuard(BUSY.mount_timeout_s)
        src = PathsSource([link], defaults=BUSY, probe=False, guard=g)
        met = threading.Event()

        def scan(*args: Any) -> None:
            if close == "source":
                src.close()
            elif close == "guard":
                g.close()
            met.set()
            raise RuntimeError(SHUTDOWN_ERROR)

        monkeypatch.setattr(paths_source, "scan_checkpoints_guarded", scan)
        try:
            assert wait_until(lambda: met.is_set() or src.collect(Sample(t=time.time())))
            assert wait_until(lambda: not our_threads("trainwatch-scan"), 10)
        finally:
            src.close()
            g.close()

    for close in ("source", "guard", None):
        one_round(close)
    assert len(thread_failures) == 1, thread_failures  # the last round: neither was closed
    assert thread_failures[0].startswith("trainwatch-scan ")
    assert thread_failures[0].endswith(f"RuntimeError: {SHUTDOWN_ERROR}")


def test_stopping_a_sampler_at_any_moment_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_failures: list[str], racy: None
) -> None:
    """The unload path: a Sampler watching directories with scans and probes every tick is
    closed at a random moment, again and again."""
    monkeypatch.setattr(path_watch, "CHECKPOINT_RESCAN_S", 0.0)
    monkeypatch.setattr(path_watch, "PROBE_RETRY_S", 0.0)
    keys = checkpoint_dirs(tmp_path, 4)
    for _ in range(20):
        sampler = Sampler([PathsSource(keys, defaults=BUSY)], interval=0.01).start()
        time.sleep(random.uniform(0.05, 0.2))
        sampler.close()
    assert wait_until(lambda: not our_threads("trainwatch-scan", "trainwatch-probe"), 10)
    assert thread_failures == []


SCRIPT = textwrap.dedent(
    """
    import random, sys, time
    from dataclasses import replace
    from trainwatch_lab.core.paths import watch as path_watch
    from trainwatch_lab.core.defaults import DEFAULTS
    from trainwatch_lab.monitor import make_sampler

    path_watch.CHECKPOINT_RESCAN_S = path_watch.PROBE_RETRY_S = 0.0
    d = replace(DEFAULTS, probe_writes=2, probe_budget_s=0.5, probe_every_s=0.0,
                local_probe_every_s=0.0, checkpoint_scan_budget_s=0.2)
    sys.setswitchinterval(1e-5)
    sampler = make_sampler(sys.argv[1:], interval=0.01, gpu=False, defaults=d).start()
    time.sleep(random.uniform(0.2, 0.5))
    if random.random() < 0.5:
        sampler.close()  # unloaded, then the process exits
        time.sleep(0.2)
    print("exiting", flush=True)
    """
)


def test_a_process_that_exits_while_monitoring_prints_no_traceback(tmp_path: Path) -> None:
    """Starts monitoring in a fresh interpreter and exits, with or without stopping first
    (atexit then closes the guards under the running threads); several at once."""
    keys = checkpoint_dirs(tmp_path, 2)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, *keys],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for _ in range(6)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.strip() == "exiting"
        assert "Traceback" not in err and "Exception in thread" not in err, err
