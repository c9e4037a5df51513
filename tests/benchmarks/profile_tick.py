"""The server's tick, profiled per source and per function (issue 33: "leaving it on costs
what iostat costs").

A real ``server.hub.Hub`` (recording off, no GPU, three watched local directories, one
"kernel": a sleeping Python process with a child, process discovery on, one stream listener
so each sample is JSON-encoded as for a panel), its sampler ticked by hand. Prints the process
CPU (``time.process_time``) per tick, each source's share, and the top functions of a
cProfile run by cumulative and by self time.

    PYTHONPATH=$PWD python -m tests.benchmarks.profile_tick [--ticks 300] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .bench_tick import prefill

TREE = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "time.sleep(600)\n"
)


class KernelManager:
    """The two calls the kernels source makes on jupyter_server's MappingKernelManager."""

    def __init__(self, kernels: dict[str, Any]) -> None:
        self.kernels = kernels

    def list_kernel_ids(self) -> list[str]:
        return list(self.kernels)

    def get_kernel(self, kid: str) -> Any:
        return self.kernels[kid]


class Timed:
    """A source wrapped in a process-CPU stopwatch (same name and behaviour)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = source.name
        self.cpu = 0.0

    def collect(self, sample: Any) -> None:
        c0 = time.process_time()
        try:
            self.source.collect(sample)
        finally:
            self.cpu += time.process_time() - c0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="also run under cProfile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-prefill", dest="prefill", action="store_false")
    parser.add_argument(
        "--live", type=float, default=0.0, help="then S seconds of the sampler's own thread at 1 s"
    )
    args = parser.parse_args()

    from trainwatch_lab.server.config import ServerSettings
    from trainwatch_lab.server.hub import Hub

    base = Path(tempfile.mkdtemp(prefix="twprof-"))
    dirs = []
    for name in ("data", "logs", "ckpt"):
        (base / name).mkdir()
        dirs.append(str(base / name))
    # a session of its own: its child goes with it (else it holds this script's stdout)
    kernel = subprocess.Popen([sys.executable, "-c", TREE], cwd=base, start_new_session=True)
    try:
        km = KernelManager(
            {
                "k1": SimpleNamespace(
                    provisioner=SimpleNamespace(pid=kernel.pid),
                    kernel_name="python3",
                    execution_state="idle",
                )
            }
        )
        config = ServerSettings(paths=dirs, gpu=False, record=False)
        hub = Hub(config, root_dir=str(base), kernel_manager=km)
        sampler = hub._create_and_start()
        sampler.stop()  # ticked by hand below
        hub._listeners.append(lambda sample, text: None)  # a panel: the JSON is encoded
        for _ in range(5):  # warm-up: rates, caches
            sampler.tick()
        if args.prefill:  # as after an hour at 1 s (the detectors' windows are full)
            prefill(sampler)
        timed = [Timed(s) for s in sampler.sources]
        sampler.sources = timed  # type: ignore[assignment]
        print(f"sources: {[s.name for s in timed]}, paths: {len(sampler.history.latest.paths)}")

        def run(n: int) -> float:
            c0 = time.process_time()
            for _ in range(n):
                sampler.tick()
                time.sleep(0.002)
            return (time.process_time() - c0) / n

        per_tick = run(args.ticks)
        print(
            f"process CPU per tick: {per_tick * 1e3:.2f} ms "
            f"(= {per_tick * 100:.2f} % of a core at 1 s), {args.ticks} ticks"
        )
        for s in timed:
            print(f"  {s.name:12s} {s.cpu / args.ticks * 1e3:7.3f} ms")
        rest = per_tick - sum(s.cpu for s in timed) / args.ticks
        print(f"  {'advice+subs':12s} {rest * 1e3:7.3f} ms (history, Advisor, subscribers)")
        if args.profile:
            prof = cProfile.Profile(time.process_time)  # CPU, not waits
            prof.enable()
            run(args.ticks)
            prof.disable()
            for key in ("cumulative", "tottime"):
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.top)
                print(out.getvalue())
        if args.live:
            sampler.sources = [t.source for t in timed]
            c0 = time.process_time()
            sampler.start()
            time.sleep(args.live)
            sampler.stop()
            cpu = (time.process_time() - c0) / args.live
            print(f"live at 1 s, {args.live:.0f} s: {cpu * 1e3:.2f} ms CPU a s ({cpu * 100:.3f} %)")
        sampler.close()
    finally:
        os.killpg(kernel.pid, signal.SIGKILL)
        kernel.wait()


if __name__ == "__main__":
    main()
