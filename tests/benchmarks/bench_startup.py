"""Row 4: what loading trainwatch costs before it shows anything.

- ``import trainwatch_lab``: ``python -X importtime`` (the cumulative line of the package), and
  wall time of ``python -c "import trainwatch_lab"`` minus ``python -c "pass"`` (medians over
  ``cfg.import_reps`` fresh interpreters). Also ``import trainwatch_lab.monitor`` (what any
  surface pulls in to sample).
- ``%load_ext trainwatch_lab`` in a real kernel, and from sending ``%trainwatch`` to the first
  widget message that carries a data point (a bqplot mark whose x/y arrays are non-empty,
  seen on iopub: what the browser draws).

    python -m tests.benchmarks.run --only startup [--quick]
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from .common import Config, Row, env_with_repo, fmt_ms, guarded, median, need_attr, skipped

GROUP = "4 startup"


def importtime_us(module: str) -> float:
    """Cumulative microseconds of ``module`` from ``-X importtime`` in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env_with_repo(),
        capture_output=True,
        text=True,
        check=True,
    )
    pattern = re.compile(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|\s*(\S+)\s*$")
    for line in proc.stderr.splitlines():
        m = pattern.match(line)
        if m and m.group(2) == module:
            return float(m.group(1))
    raise RuntimeError(f"no importtime line for {module}")


def wall_s(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env_with_repo(), check=True)
    return time.perf_counter() - t0


def imports(cfg: Config) -> list[Row]:
    rows = []
    for module in ("trainwatch_lab", "trainwatch_lab.monitor"):
        _, why = need_attr(module, "__name__")
        if why:
            rows.append(skipped(GROUP, f"`import {module}`", why))
            continue
        cum = median([importtime_us(module) for _ in range(cfg.import_reps)])
        rows.append(
            Row(
                GROUP,
                f"`import {module}` (-X importtime, cumulative, median)",
                fmt_ms(cum / 1e6),
                note="cheap root: entry points import their layer lazily"
                if module == "trainwatch_lab"
                else "sources, advice, psutil",
                data={"importtime_us": cum},
            )
        )
    base = median([wall_s("pass") for _ in range(cfg.import_reps)])
    pkg = median([wall_s("import trainwatch_lab") for _ in range(cfg.import_reps)])
    rows.append(
        Row(
            GROUP,
            "`python -c 'import trainwatch_lab'` minus `python -c pass` (wall, median)",
            fmt_ms(pkg - base),
            note=f"interpreter alone {fmt_ms(base)}",
        )
    )
    return rows


def has_point(state: dict[str, Any]) -> bool:
    """A bqplot mark state with a non-empty x or y array (serialized as {shape, dtype, ...})."""
    for key in ("x", "y"):
        v = state.get(key)
        if isinstance(v, dict) and "shape" in v:
            shape = v["shape"]
            if shape and all(int(s) > 0 for s in shape):
                return True
        elif isinstance(v, list) and v and not all(isinstance(e, list) and not e for e in v):
            return True
    return False


def first_point_time(messages: list[tuple[float, dict]]) -> float | None:
    for t, msg in messages:
        kind = msg["header"]["msg_type"]
        if kind not in ("comm_open", "comm_msg"):
            continue
        data = msg["content"].get("data", {})
        state = data.get("state") or {}
        if has_point(state):
            return t
    return None


def first_point(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.notebook.magics", "load_ipython_extension")
    if why:
        return [skipped(GROUP, "`%trainwatch` to first drawn point", why)]
    from .kernel import kernel_session

    workdir = tempfile.mkdtemp(prefix="twbench-start-")
    try:
        with kernel_session() as k:
            t0 = time.perf_counter()
            k.check("%load_ext trainwatch_lab")
            load_ext = time.perf_counter() - t0
            seen: list[tuple[float, dict]] = []
            t0 = time.perf_counter()
            reply = k.check(f"%trainwatch --logdir {workdir}", timeout=60)
            returned = time.perf_counter() - t0
            seen.extend(reply.messages)
            # the first point may come from the sampler thread after the cell returned
            deadline = time.monotonic() + 15
            while first_point_time(seen) is None and time.monotonic() < deadline:
                k.drain(0.5, lambda t, m: seen.append((t, m)))
            t_point = first_point_time(seen)
            k.execute("%trainwatch stop")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = [
        Row(GROUP, "`%load_ext trainwatch_lab` in a real kernel", fmt_ms(load_ext)),
        Row(GROUP, "`%trainwatch --logdir D` cell returns", fmt_ms(returned)),
    ]
    if t_point is None:
        rows.append(
            Row(
                GROUP,
                "`%trainwatch` to first drawn point",
                "no data point within 15 s",
                status="MISS",
                note="no comm message with a non-empty x/y array seen on iopub",
            )
        )
    else:
        rows.append(
            Row(
                GROUP,
                "`%trainwatch` to first drawn point (widget message with data on iopub)",
                fmt_ms(t_point - t0),
                data={"seconds": t_point - t0},
            )
        )
    return rows


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "import time", lambda: imports(cfg)),
        *guarded(GROUP, "first drawn point", lambda: first_point(cfg)),
    ]
