"""Row 3: how much a synthetic training loop slows down while trainwatch watches it.

The loop (tests/benchmarks/workload.py: numpy compute, a 1 MiB read from a data file, a log
line and a 256 KiB checkpoint per step) runs in blocks of a fixed number of steps, monitoring
off and on alternately, ``cfg.loop_pairs`` pairs in one run. Each pair gives a ratio
t_on / t_off; the row reports the mean slowdown with a 95 % Student-t interval.

Two variants:
- plain Python: ``make_sampler([workdir]).start()/.stop()`` in the loop's own process;
- a real kernel: ``%trainwatch --logdir workdir`` (sampler + live widget updates over iopub);
  "off" stops that sampler's thread, "on" starts it again (the widget stays).

    python -m tests.benchmarks.run --only loop [--quick]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile

from .common import Config, Row, env_with_repo, guarded, judged, mean_ci, need_attr, skipped

GROUP = "3 loop"
TARGET = "< 1 %"

SUBPROCESS_CODE = r"""
import json, sys
from tests.benchmarks.workload import TrainingStep, alternate
from trainwatch_lab.monitor import make_sampler
workdir, pairs, block_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
step = TrainingStep(workdir)
sampler = make_sampler([workdir], interval=1.0)
sampler.start()  # first probes and helper processes start outside the timed blocks
import time; time.sleep(3)
print(json.dumps(alternate(step, sampler.start, sampler.stop, pairs, block_s)))
sampler.close()
"""


def summarize(result: dict, label: str) -> Row:
    ratios = [on / off for on, off in zip(result["on"], result["off"], strict=True)]
    mean, lo, hi = mean_ci([100 * (r - 1) for r in ratios])
    n = len(ratios)
    ok = hi < 1.0
    verdict = judged(ok) if (ok or lo >= 1.0) else "inconclusive"
    return Row(
        GROUP,
        f"slowdown, {label}",
        f"{mean:+.2f} % (95 % CI {lo:+.2f} .. {hi:+.2f})",
        TARGET,
        verdict,
        note=(
            f"{n} on/off pairs x {result['steps_per_block']} steps; "
            f"median block off {statistics.median(result['off']):.2f} s"
        ),
        data={"ratios": ratios, **result},
    )


def plain(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.monitor", "make_sampler")
    if why:
        return [skipped(GROUP, "slowdown, sampler in the loop's process", why)]
    workdir = tempfile.mkdtemp(prefix="twbench-loop-")
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                SUBPROCESS_CODE,
                workdir,
                str(cfg.loop_pairs),
                str(cfg.loop_block_s),
            ],
            env=env_with_repo(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
            capture_output=True,
            text=True,
            timeout=120 + 4 * cfg.loop_pairs * cfg.loop_block_s,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [summarize(result, "sampler thread in the loop's process (plain Python)")]


def in_kernel(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.notebook.magics", "load_ipython_extension")
    if why:
        return [skipped(GROUP, "slowdown, %trainwatch in a real kernel", why)]
    from .kernel import FIND_SAMPLER, kernel_session

    workdir = tempfile.mkdtemp(prefix="twbench-loop-")
    try:
        with kernel_session() as k:
            k.check("%load_ext trainwatch_lab")
            k.check(f"%trainwatch --logdir {workdir}")
            k.check(FIND_SAMPLER)
            k.check(
                "from tests.benchmarks.workload import TrainingStep, alternate_json\n"
                f"_tw_step = TrainingStep({workdir!r})\n"
                "import time; time.sleep(3)"
            )
            reply = k.check(
                "print(alternate_json(_tw_step, _tw_sampler.start, _tw_sampler.stop, "
                f"{cfg.loop_pairs}, {cfg.loop_block_s}))",
                timeout=120 + 4 * cfg.loop_pairs * cfg.loop_block_s,
            )
            result = json.loads(reply.stdout.strip().splitlines()[-1])
            k.execute("%trainwatch stop")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [summarize(result, "%trainwatch in a real kernel (sampler + widget updates)")]


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "slowdown, plain Python", lambda: plain(cfg)),
        *guarded(GROUP, "slowdown, real kernel", lambda: in_kernel(cfg)),
    ]
