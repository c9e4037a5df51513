"""Step time of a synthetic training loop that saves a 256 MiB state every N steps, with
``save_checkpoint`` in the foreground against ``background=True`` (issue 17, item 3).

Reports, asserts nothing. Each step is ``--step-ms`` of CPU work (a stand-in for a GPU step
that the host thread waits on); every ``--every`` steps the loop hands the state to a save.
Run: ``python -m tests.benchmarks.bench_checkpoint_background [--dir /tmp/x] [--every 10]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from trainwatch_lab.fix import save_checkpoint

MIB = 1024 * 1024


def _work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def loop(directory: str, background: bool, steps: int, every: int, step_s: float, mib: int):
    """Per-step wall times (s) and the whole loop's time, the last save included."""
    state = os.urandom(mib * MIB)  # bytes: the loop never changes what a save is writing
    handle = None

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(state)

    times = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        _work(step_s)
        if step % every == 0:
            target = os.path.join(directory, f"step-{step:05d}.pt")
            if background:
                handle = save_checkpoint(write, target, keep=2, background=True)
            else:
                save_checkpoint(write, target, keep=2)
        times.append(time.perf_counter() - t0)
    if handle is not None:
        handle.wait()
    return times, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where to save (default: a new directory under /tmp)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--step-ms", type=float, default=50.0)
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()
    base = args.dir or tempfile.mkdtemp(prefix="twbench-ckpt-")
    print(f"dir {base}, {args.mib} MiB every {args.every} steps of {args.step_ms:g} ms\n")
    print("| mode | median step ms | p99 step ms | max step ms | saving-step ms (mean) | total s |")
    print("|---|---|---|---|---|---|")
    for background in (False, True):
        directory = os.path.join(base, "bg" if background else "fg")
        os.makedirs(directory, exist_ok=True)
        times, total = loop(
            directory, background, args.steps, args.every, args.step_ms / 1e3, args.mib
        )
        ms = sorted(t * 1e3 for t in times)
        saving = [times[i] * 1e3 for i in range(args.every - 1, len(times), args.every)]
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        print(
            f"| {'background' if background else 'foreground'} | {statistics.median(ms):.1f} "
            f"| {p99:.1f} | {ms[-1]:.1f} | {statistics.mean(saving):.1f} | {total:.2f} |"
        )


if __name__ == "__main__":
    main()
