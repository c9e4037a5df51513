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
FIRST_POINT_TARGET_S = 1.0  # issue 11: the compact default draws within 1 s


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
    base_runs: list[float] = []
    pkg_runs: list[float] = []
    for _ in range(max(10, 2 * cfg.import_reps)):  # interleaved, so load drifts hit both
        base_runs.append(wall_s("pass"))
        pkg_runs.append(wall_s("import trainwatch_lab"))
    rows.append(
        Row(
            GROUP,
            "`python -c 'import trainwatch_lab'` minus `python -c pass` (wall, fastest runs)",
            fmt_ms(min(pkg_runs) - min(base_runs)),
            note=(
                f"{len(base_runs)} interleaved runs each; interpreter alone "
                f"{fmt_ms(min(base_runs))}; medians {fmt_ms(median(pkg_runs))} vs "
                f"{fmt_ms(median(base_runs))}"
            ),
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


def first_content_time(messages: list[tuple[float, dict]]) -> float | None:
    """The first widget message whose header says ``live`` (the first sample's numbers):
    what the user sees change before any chart line. It may come before the cell returns."""
    for t, msg in messages:
        if msg["header"]["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        value = (msg["content"].get("data", {}).get("state") or {}).get("value")
        if isinstance(value, str) and 'data-state="live"' in value:
            return t
    return None


def watch_until_point(k: Any, magic: str) -> tuple[float, float, float | None, float | None]:
    """Send ``magic``; return (t0, cell returned, first content, first drawn point)."""
    seen: list[tuple[float, dict]] = []
    t0 = time.perf_counter()
    reply = k.check(magic, timeout=60)
    returned = time.perf_counter()
    seen.extend(reply.messages)
    # the first point comes from the sampler thread, after the cell returned
    deadline = time.monotonic() + 20
    while first_point_time(seen) is None and time.monotonic() < deadline:
        k.drain(0.5, lambda t, m: seen.append((t, m)))
    return t0, returned, first_content_time(seen), first_point_time(seen)


def first_point(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.notebook.magics", "load_ipython_extension")
    if why:
        return [skipped(GROUP, "`%trainwatch` to first drawn point", why)]
    from .kernel import kernel_session

    rows: list[Row] = []
    workdir = tempfile.mkdtemp(prefix="twbench-start-")
    try:
        for window in ("", "1m"):
            with kernel_session() as k:
                t0 = time.perf_counter()
                k.check("%load_ext trainwatch_lab")
                load_ext = time.perf_counter() - t0
                option = f" --window {window}" if window else ""
                magic = f"%trainwatch --logdir {workdir}{option}"
                t0, returned, content, point = watch_until_point(k, magic)
                k.execute("%trainwatch stop")
            label = f"`%trainwatch{option}`" + ("" if window else " (default 10 min window)")
            if not window:
                rows.append(
                    Row(GROUP, "`%load_ext trainwatch_lab` in a real kernel", fmt_ms(load_ext))
                )
                rows.append(Row(GROUP, f"{label}: cell returns", fmt_ms(returned - t0)))
                if content is not None:
                    rows.append(
                        Row(
                            GROUP,
                            f"{label}: first live update (header values)",
                            fmt_ms(content - t0),
                        )
                    )
            if point is None:
                rows.append(
                    Row(
                        GROUP,
                        f"{label} to first drawn point",
                        "no data point within 20 s",
                        status="MISS",
                        note="no comm message with a non-empty x/y array seen on iopub",
                    )
                )
            else:
                rows.append(
                    Row(
                        GROUP,
                        f"{label} to first drawn point (chart line data on iopub)",
                        fmt_ms(point - t0),
                        target="<= 1 s",
                        status="ok" if point - t0 <= FIRST_POINT_TARGET_S else "MISS",
                        note="the first sample is drawn as a dot (free space has a value at "
                        "once; disk rates need a second reading); then one redraw per "
                        "bucket (window / 120, at least the interval)",
                        data={"seconds": point - t0},
                    )
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "import time", lambda: imports(cfg)),
        *guarded(GROUP, "first drawn point", lambda: first_point(cfg)),
    ]
