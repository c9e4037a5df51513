"""Row 6: memory stays flat however long it runs.

- History: 86,400 synthetic Samples (24 h at 1 s: 2 disks, 3 watched paths, 2 GPUs, the
  process) appended to ``History(capacity=3600)`` in a fresh interpreter; tracemalloc and RSS
  after 1 h, 12 h and 24 h of samples. A second run adds a new device name every 10 minutes
  (hot-plugged disks) to show the series cap. A third feeds the Advisor too (shorter).
- Browser: JupyterLab with the trainwatch panel open for ``cfg.heap_minutes`` (10 min; 1 with
  --quick) at 1 s, Debian Chromium driven by Playwright; JS heap from the Chrome DevTools
  Protocol (``Performance.getMetrics`` JSHeapUsedSize) after a forced GC at the start and end.

    python -m tests.benchmarks.run --only memory [--quick] [--heap-minutes 10]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from .common import Config, Row, env_with_repo, fmt_bytes, guarded, judged, need_attr, skipped

GROUP = "6 memory"

HISTORY_SCRIPT = r"""
import gc, json, sys, time, tracemalloc
import psutil
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    DiskRates, GpuState, PathState, ProbeResult, ProcessIO, Sample)

n, mode = int(sys.argv[1]), sys.argv[2]
trace = mode != "rss"
GIB = 1 << 30
T0 = 1_700_000_000.0

def sample(i):
    t = T0 + i
    disks = {d: DiskRates(d, i % 7, i % 11, 1.5, 2.5, 0.4, 1.2, 0.01, (i % 100) * 1.0)
             for d in ("vda", "nvme0n1")}
    if mode == "churn":  # a new device every 10 minutes
        name = f"sd{i // 600}"
        disks[name] = DiskRates(name, 1, 1, 0.1, 0.1, 0.1, 0.1, 0.0, 1.0)
    paths = {p: PathState(p, exists=True, mountpoint="/", fstype="ext4", device="vda",
                          kind="local", total_bytes=500 * GIB, free_bytes=200 * GIB - i * 4096,
                          avail_bytes=190 * GIB - i * 4096, inodes_total=10**7,
                          inodes_free=9 * 10**6, probe=ProbeResult(0.8, 2.0, 16))
             for p in ("/data", "/root/runs", "/mnt/share/logs")}
    gpus = [GpuState(k, k, f"GPU-{k}", "H100", util_pct=i % 100, mem_util_pct=30.0,
                     mem_used_bytes=40 * GIB, mem_total_bytes=80 * GIB, power_w=300.0,
                     temp_c=60.0, pcie_rx_bps=1e9, pcie_tx_bps=1e8,
                     process_mem_bytes=39 * GIB) for k in range(2)]
    proc = ProcessIO(4242, 3, 1e6, 2e6, 5e5, 1e6)
    return Sample(t=t, disks=disks, paths=paths, gpus=gpus, process=proc)

advisor = None
if mode == "advice":
    from trainwatch_lab.advice.advisor import Advisor
    advisor = Advisor()

def rss():
    gc.collect()
    return psutil.Process().memory_info().rss

if trace:
    tracemalloc.start()
base_rss = rss()
h = History(capacity=3600)
marks = {}
points = {3600, n // 2, n}
t_start = time.perf_counter()
for i in range(n):
    s = sample(i)
    h.append(s)
    if advisor is not None:
        s.warnings = advisor.evaluate(s, h)
    if i + 1 in points:
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] if trace else None
        marks[i + 1] = {"traced": traced, "rss": rss() - base_rss, "series": len(h.keys())}
per_sample = (time.perf_counter() - t_start) / n
print(json.dumps({"marks": marks, "per_sample_s": per_sample}))
"""


def history_run(n: int, mode: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", HISTORY_SCRIPT, str(n), mode],
        env=env_with_repo(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["marks"] = {int(k): v for k, v in out["marks"].items()}
    return out


def history(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.core.history", "History")
    if why:
        return [skipped(GROUP, "History after 24 h", why)]
    n = cfg.history_samples
    rows = []
    traced = history_run(n, "trace")["marks"]
    rss = history_run(n, "rss")["marks"]
    h1, h24 = traced[3600]["traced"], traced[n]["traced"]
    growth = h24 - h1
    rows.append(
        Row(
            GROUP,
            f"History(capacity=3600) after {n:,} samples (24 h at 1 s): tracemalloc",
            f"{fmt_bytes(h24)} (1 h: {fmt_bytes(h1)}, 12 h: {fmt_bytes(traced[n // 2]['traced'])})",
            "flat after 1 h",
            judged(growth < 64 * 1024),
            note=f"growth 1 h -> 24 h {fmt_bytes(growth)}; {traced[n]['series']} series",
            data={"traced": traced},
        )
    )
    rows.append(
        Row(
            GROUP,
            "same, process RSS above the interpreter's",
            f"{fmt_bytes(rss[n]['rss'])} (1 h: {fmt_bytes(rss[3600]['rss'])})",
            "flat after 1 h",
            judged(rss[n]["rss"] - rss[3600]["rss"] < 1 << 20),
            data={"rss": rss},
        )
    )
    churn = history_run(n, "churn")["marks"]
    rows.append(
        Row(
            GROUP,
            "same, with a new device every 10 min (144 devices over 24 h)",
            f"{fmt_bytes(churn[n]['traced'])} (1 h: {fmt_bytes(churn[3600]['traced'])})",
            "bounded",
            judged(churn[n]["series"] <= 1024),
            note=f"{churn[n]['series']} series kept (vanished devices evicted at the cap)",
            data={"churn": churn},
        )
    )
    n_adv = 7200 if not cfg.quick else 3700
    adv = history_run(n_adv, "advice")
    m = adv["marks"]
    rows.append(
        Row(
            GROUP,
            f"History + Advisor over {n_adv:,} samples: tracemalloc",
            f"{fmt_bytes(m[n_adv]['traced'])} (1 h: {fmt_bytes(m[3600]['traced'])})",
            "flat after 1 h",
            judged(m[n_adv]["traced"] - m[3600]["traced"] < 256 * 1024),
            note=f"advice {adv['per_sample_s'] * 1000:.2f} ms per sample (with tracemalloc)",
            data={"advice": m},
        )
    )
    return rows


def browser_heap(cfg: Config) -> list[Row]:
    from tests.support import lab as lablib

    _, why = need_attr("trainwatch_lab.server.extension", "__name__")
    if why:
        return [skipped(GROUP, "panel JS heap growth", why)]
    setup, why = need_attr("tests.server.test_browser", "lab_setup")
    if why:
        return [skipped(GROUP, "panel JS heap growth", why)]
    return heap_run(cfg, lablib, setup)


def heap_run(cfg: Config, lablib: Any, lab_setup: Any) -> list[Row]:
    """JupyterLab serving the freshly built labextension with the server extension enabled
    (helper E's ``lab_setup``, the same as the browser tests), Chromium, the panel open."""
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="twbench-heap-"))
    try:
        return _heap_in(cfg, lablib, lab_setup, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _heap_in(cfg: Config, lablib: Any, lab_setup: Any, base: Any) -> list[Row]:
    root = base / "root"
    root.mkdir()
    args, env = lab_setup(base)
    frames = {"count": 0, "bytes": 0}
    samples: list[tuple[float, float]] = []
    with (
        lablib.jupyter_lab(root, extra_args=args, env=env) as lab,
        lablib.chromium_page() as page,
    ):

        def on_ws(ws: Any) -> None:
            if "trainwatch" not in ws.url:
                return

            def frame(payload: Any) -> None:
                frames["count"] += 1
                frames["bytes"] += len(payload.encode() if isinstance(payload, str) else payload)

            ws.on("framereceived", frame)

        page.on("websocket", on_ws)
        page.goto(lab.url("lab"))
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.started", timeout=120_000
        )
        page.wait_for_timeout(3000)
        commands = page.evaluate("() => window.jupyterapp.commands.listCommands()")
        opener = next(
            (c for c in commands if "trainwatch" in c.lower() and "open" in c.lower()), None
        )
        if opener is None:
            raise RuntimeError(
                f"no trainwatch 'open' command among {[c for c in commands if 'trainwatch' in c]}"
            )
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")

        def heap(gc: bool) -> float:
            if gc:
                cdp.send("HeapProfiler.collectGarbage")
            metrics = cdp.send("Performance.getMetrics")["metrics"]
            return next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize")

        before_panel = heap(True)
        page.evaluate("(c) => window.jupyterapp.commands.execute(c)", opener)
        warmup = 30 if not cfg.quick else 10
        page.wait_for_timeout(warmup * 1000)
        start = heap(True)
        frames0 = dict(frames)
        t0 = time.monotonic()
        duration = cfg.heap_minutes * 60
        step = 30 if duration >= 300 else 10
        while (elapsed := time.monotonic() - t0) < duration:
            page.wait_for_timeout(min(step, duration - elapsed) * 1000)
            samples.append((time.monotonic() - t0, heap(False)))
        end = heap(True)
        panel_samples = page.evaluate(
            "() => Number((document.querySelector('#trainwatch-lab-panel') || {dataset: {}})"
            ".dataset.samples || 0)"
        )
        shot = lablib.artifact_path("bench-heap-panel.png")
        page.screenshot(path=str(shot))
    growth = end - start
    n_frames = frames["count"] - frames0["count"]
    wall = time.monotonic() - t0
    peak = max(v for _, v in samples) if samples else end
    return [
        Row(
            GROUP,
            f"panel JS heap growth over {cfg.heap_minutes:g} min at 1 s (after forced GC)",
            f"{growth / 1e6:+.2f} MB ({start / 1e6:.1f} -> {end / 1e6:.1f} MB)",
            "< 2 MB",
            judged(growth < 2e6),
            note=(
                f"panel opened with `{opener}`, +{(start - before_panel) / 1e6:.1f} MB; "
                f"peak without GC {peak / 1e6:.1f} MB; panel drew {panel_samples} samples; "
                f"{n_frames} stream frames "
                f"({n_frames / wall:.2f}/s, {frames['bytes'] - frames0['bytes']} B); "
                f"screenshot {shot.relative_to(lablib.REPO_ROOT)}"
            ),
            data={"samples": samples, "start": start, "end": end},
        )
    ]


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "History after 24 h", lambda: history(cfg)),
        *guarded(GROUP, "panel JS heap growth", lambda: browser_heap(cfg)),
    ]
