"""What trainwatch_lab's NVML code meets on a real GPU machine (issue 16), in about two minutes.

Run through tests/gpu/check_on_gpu.sh (or ``python tests/gpu/gpu_report.py``). Reports:
NVML's PIDs against ours (and the NSpid line); the NVML symbols this driver exports, with the
driver and nvidia-ml-py versions; two processes holding 1 and 3 GiB read back per process;
a 200 ms-on/800 ms-off kernel's utilization per tick against nvmlDeviceGetSamples; MIG mode
(read only); NVML's order against CUDA's UUID order (CUDA_DEVICE_ORDER unset and PCI_BUS_ID);
no gpu-stalled for a model idle 60 s in an event loop (an idle kernel: no cell running); the
GPU source's per-tick cost with and without the PCIe reads. Load comes from torch if it is
installed, else the CUDA driver API through ctypes (tests/gpu/cuda_backend.py).

Exit 0: every judged part OK; 1: a part failed (the report says which); 2: a prerequisite is
missing (one line says which). ``--nvml-only`` runs the parts that need no CUDA (the test
against the fake NVML uses it). Never changes a GPU setting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.gpu import cuda_backend, nvml_report

GIB = 1 << 30
HERE = Path(__file__).resolve()
RESULTS: dict[str, bool] = {}


def judged(part: str, ok: bool, detail: str) -> None:
    RESULTS[part] = ok
    print(f"[{'OK' if ok else 'FAIL'}] {part}: {detail}", flush=True)


def child(args: argparse.Namespace) -> int:
    """A helper process: hold GiB and wait, run the duty cycle, or print CUDA's UUIDs."""
    if args.child == "uuids":  # the driver API alone: no context, nothing allocated
        print(json.dumps(cuda_backend.DriverApi(index=-1).uuids()), flush=True)
        return 0
    cuda = cuda_backend.backend(args.backend)
    if args.child == "hold":
        cuda.hold(int(args.gib * GIB))
        print("ready", flush=True)
        time.sleep(120)
    else:
        cuda.work(0.2)  # context and first kernel out of the way
        print("ready", flush=True)
        cuda_backend.duty(cuda, 0.2, 0.8, args.seconds)
    return 0


def start(*extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A helper process (this file with ``--child``); ``ready`` waits for its first line."""
    cmd = [sys.executable, str(HERE), "--child", *extra, "--backend", ARGS.backend]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)


def ready(proc: subprocess.Popen[str]) -> str:
    line = proc.stdout.readline() if proc.stdout else ""
    if "ready" not in line and not line.startswith("["):
        proc.kill()
        raise RuntimeError(f"helper {proc.args} did not start: {line!r}")
    return line


def spawn(*extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = start(*extra, env=env)
    return proc, ready(proc)


def part_versions(nvml: Any) -> None:
    print("== versions and NVML symbols")
    for key, value in nvml_report.versions(nvml).items():
        print(f"  {key}: {value}")
    found = nvml_report.symbols()
    print("  present: " + " ".join(n for n, ok in found.items() if ok))
    print("  missing: " + (" ".join(n for n, ok in found.items() if not ok) or "none"))
    print(f"  {nvml_report.ns_pid_line()} (our pid {os.getpid()})")


def part_memory(nvml: Any) -> None:
    """Two processes hold 1 and 3 GiB: NVML's PIDs against theirs, each one's memory."""
    from trainwatch_lab.core.gpu.source import GpuSource
    from trainwatch_lab.core.model import Sample

    print("== two processes holding 1 and 3 GiB")
    holders = {gib: start("hold", "--gib", str(gib)) for gib in (1, 3)}  # side by side
    try:
        for proc in holders.values():
            ready(proc)
        listed = nvml_report.nvml_pids(nvml)
        ours = {p.pid for p in holders.values()}
        verdict = nvml_report.pid_verdict(listed, ours)
        print(f"  NVML lists {listed}; the holders are {sorted(ours)}")
        print(f"  NVML's PIDs are ours: {verdict} (host: a container without the host's PIDs)")
        for gib, proc in holders.items():
            source = GpuSource(pid=proc.pid)
            sample = Sample(t=time.time())
            source.collect(sample)
            got = sample.gpus[0].process_mem_bytes if sample.gpus else None
            note = sample.notes.get("gpu_processes", "NVML's PIDs")
            source.close()
            ok = got is not None and gib * GIB <= got <= (gib + 1) * GIB
            judged(f"{gib} GiB read back", ok, f"{got} bytes ({note})")
    finally:
        for proc in holders.values():
            proc.kill()
            proc.wait()


def part_duty(nvml: Any, seconds: float = 10.0) -> None:
    """200 ms on / 800 ms off: the per-tick utilization against the sample buffer's mean."""
    from trainwatch_lab.core.gpu import utilization as gpu_util
    from trainwatch_lab.core.gpu.source import GpuSource
    from trainwatch_lab.core.model import Sample

    print("== duty-cycled kernel, 200 ms on / 800 ms off")
    proc, _ = spawn("duty", "--seconds", str(seconds))
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    source, ticks, rates, whole = GpuSource(pid=proc.pid), [], [], None
    try:
        _, since = gpu_util.mean_since(nvml, handle, None)
        end = time.monotonic() + seconds - 1
        while time.monotonic() < end:
            sample = Sample(t=time.time())
            source.collect(sample)
            ticks.append(sample.gpus[0].util_pct if sample.gpus else None)
            rates.append(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            time.sleep(1.0)
        whole, _ = gpu_util.mean_since(nvml, handle, since)
    except nvml.NVMLError as exc:  # a board without the sample buffer: say so, go on
        print(f"  nvmlDeviceGetSamples: {exc}")
    finally:
        source.close()
        proc.kill()
        proc.wait()
    per_tick = [t for t in ticks[1:] if t is not None]
    mean = statistics.fmean(per_tick) if per_tick else None
    print(f"  per tick: {ticks}; one GetUtilizationRates a tick: {rates}")
    print(f"  nvmlDeviceGetSamples over the run: {whole}")
    judged("duty cycle", mean is not None and 10 <= mean <= 35, f"per-tick mean {mean} (~20)")


def part_numbering(nvml: Any) -> None:
    print("== NVML index against CUDA's UUID order")
    count = nvml.nvmlDeviceGetCount()
    nvml_uuids = [
        nvml_report._text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))
        for i in range(count)
    ]
    for order in (None, "PCI_BUS_ID"):
        env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_ORDER"}
        if order:
            env["CUDA_DEVICE_ORDER"] = order
        proc, line = spawn("uuids", env=env)
        cuda = json.loads(line)
        proc.wait()
        same = [u for u in nvml_uuids if u in cuda] == cuda
        print(f"  CUDA_DEVICE_ORDER={order or '(unset)'}: CUDA {cuda}; NVML {nvml_uuids}")
        if order and len(cuda) == len(nvml_uuids):  # MIG or CUDA_VISIBLE_DEVICES: no verdict
            judged("PCI order", same, "CUDA's order is NVML's under PCI_BUS_ID")
        else:
            print(f"  CUDA's order is NVML's: {same}")


def part_idle(cuda: Any, seconds: float = 60.0) -> None:
    """A model loaded, real GPU work, then the main thread idle in an event loop (a kernel
    between cells) for ``seconds``: gpu-stalled must not fire."""
    from trainwatch_lab.monitor import make_sampler

    print(f"== model idle {seconds:.0f} s in an event loop (no cell running)")
    cuda.hold(512 << 20)
    sampler = make_sampler([], pid=os.getpid(), interval=1.0)
    fired: set[str] = set()
    busiest = [0.0]

    def seen(sample: Any) -> None:
        fired.update(w.code for w in sample.warnings)
        busiest[0] = max([busiest[0], *(g.util_pct or 0.0 for g in sample.gpus)])

    sampler.subscribe(seen)
    sampler.start()
    try:
        cuda.work(5.0)  # real work the rule sees: it may only fire after some
        asyncio.run(asyncio.sleep(seconds))
    finally:
        sampler.close()
    detail = f"warnings seen: {sorted(fired) or 'none'}; busiest tick {busiest[0]:.0f} %"
    judged("idle model", "gpu-stalled" not in fired and busiest[0] >= 20, detail)


def part_cost() -> None:
    print("== GPU source per tick")
    every = nvml_report.tick_cost(pcie_every_s=0.0)
    default = nvml_report.tick_cost()  # one PCIe read in the first tick, none after
    print(f"  PCIe read every tick: {every}")
    print(f"  PCIe every {nvml_report.DEFAULTS.gpu_pcie_every_s:g} s (default): {default}")


def main() -> int:
    try:
        nvml = nvml_report.start()
        part_versions(nvml)
        print("== MIG (read only)\n  " + "\n  ".join(nvml_report.mig_report(nvml)))
        part_cost()
        if ARGS.nvml_only:  # what runs on the GPU already: ours if our parent's is listed
            listed = nvml_report.nvml_pids(nvml)
            verdict = nvml_report.pid_verdict(listed, {os.getpid(), os.getppid()})
            print(f"== NVML lists {listed}; NVML's PIDs are ours: {verdict}")
        else:
            cuda = cuda_backend.backend(ARGS.backend)  # Missing when CUDA is not usable
            print(f"== load from: {cuda.name}")
            part_memory(nvml)
            part_duty(nvml)
            part_numbering(nvml)
            part_idle(cuda, ARGS.idle_s)
    except (nvml_report.Missing, cuda_backend.Missing) as exc:
        print(f"gpu_report: prerequisite missing: {exc}", file=sys.stderr, flush=True)
        return 2
    failed = [part for part, ok in RESULTS.items() if not ok]
    print(f"RESULT: {'FAIL ' + ', '.join(failed) if failed else 'OK'}", flush=True)
    return 1 if failed else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="what NVML and CUDA answer on this machine")
    parser.add_argument("--backend", choices=("auto", "torch", "ctypes"), default="auto")
    parser.add_argument("--nvml-only", action="store_true", help="no CUDA: NVML's parts only")
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--child", choices=("hold", "duty", "uuids"), help=argparse.SUPPRESS)
    parser.add_argument("--gib", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=10.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


ARGS = parse([])
if __name__ == "__main__":
    ARGS = parse()
    sys.exit(child(ARGS) if ARGS.child else main())
