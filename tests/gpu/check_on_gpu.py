"""Real-GPU check (run through check_on_gpu.sh): train on cuda, stall the log storage, watch.

Phases: ``--seconds-before`` of healthy training that logs a record every few steps (write +
flush + fsync, like TensorBoard's event writer); then the storage stops answering (a paused
sshfs server, or a FIFO nobody reads) and the training loop blocks in ``flush``, so the GPU
really goes idle while its memory stays allocated; the check waits for ``gpu-stalled`` (at most
``--stall-for`` seconds), resumes the storage, trains a few more seconds and reports.

Self-contained on purpose: no pytest, no network; only torch, psutil, nvidia-ml-py and this
repository. Everything it starts (sshd, the sshfs mount, the FIFO reader) is undone in
``finally``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SFTP_SERVERS = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
    "/usr/libexec/sftp-server",
)


def fail(code: int, text: str) -> None:
    print(f"check_on_gpu: {text}", file=sys.stderr, flush=True)
    sys.exit(code)


# -- the two ways to stall storage ----------------------------------------------------------
class SshfsStall:
    """A private sshd on 127.0.0.1 mounted with sshfs; pause() SIGSTOPs its sftp-server."""

    kind = "sshfs"

    def __init__(self, base: Path) -> None:
        import psutil

        self._psutil = psutil
        sshd, keygen, sshfs = (shutil.which(t) for t in ("sshd", "ssh-keygen", "sshfs"))
        sftp = next((p for p in SFTP_SERVERS if os.access(p, os.X_OK)), None)
        if not (sshd and keygen and sshfs and sftp and os.path.exists("/dev/fuse")):
            raise RuntimeError("needs sshd, ssh-keygen, sshfs, sftp-server and /dev/fuse")
        keys, self.remote, self.mountpoint = base / "keys", base / "remote", base / "mnt"
        for d in (keys, self.remote, self.mountpoint):
            d.mkdir(parents=True)
        (self.remote / "logs").mkdir()
        host, client = keys / "host", keys / "client"
        for key in (host, client):
            subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        shutil.copy(f"{client}.pub", keys / "authorized_keys")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        user = pwd.getpwuid(os.geteuid()).pw_name
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = keys / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile none\n"
            f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            f"StrictModes no\nAllowUsers {user}\nLogLevel ERROR\nSubsystem sftp {sftp}\n"
        )
        self.sshd = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.sftp_pid: int | None = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as s, contextlib.suppress(OSError):
                s.connect(("127.0.0.1", port))
                break
            time.sleep(0.1)
        options = (
            f"IdentityFile={client},IdentitiesOnly=yes,StrictHostKeyChecking=no,"
            f"UserKnownHostsFile=/dev/null,BatchMode=yes,port={port},LogLevel=ERROR"
        )
        subprocess.run(
            [sshfs, f"{user}@127.0.0.1:{self.remote}", str(self.mountpoint), "-o", options],
            check=True,
            timeout=30,
        )
        self.mounted = True
        self.path = self.mountpoint / "logs"
        self.log_file = self.path / "events.out.tfevents.check"
        for _ in range(50):
            kids = psutil.Process(self.sshd.pid).children(recursive=True)
            found = [p.pid for p in kids if p.name() == "sftp-server"]
            if found:
                self.sftp_pid = found[0]
                break
            time.sleep(0.1)
        if self.sftp_pid is None:
            self.close()
            raise RuntimeError("could not find the sftp-server serving the mount")

    def pause(self) -> None:
        os.kill(self.sftp_pid, signal.SIGSTOP)  # type: ignore[arg-type]

    def resume(self) -> None:
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(self.sftp_pid, signal.SIGCONT)  # type: ignore[arg-type]

    def close(self) -> None:
        self.resume()
        if getattr(self, "mounted", False):
            for cmd in (["fusermount3", "-u", "-z"], ["umount", "-l"]):
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    subprocess.run([*cmd, str(self.mountpoint)], capture_output=True, timeout=15)
            self.mounted = False
        with contextlib.suppress(Exception):
            for p in self._psutil.Process(self.sshd.pid).children(recursive=True):
                p.kill()
        self.sshd.kill()
        self.sshd.wait(timeout=10)


class FifoStall:
    """FUSE-less fallback: the log "file" is a FIFO on local disk drained by a thread;
    pause() stops draining, so once the pipe buffer (64 KiB) is full the writer blocks in
    write(2) in the kernel, exactly where a write to a dead network share would wait."""

    kind = "fifo"

    def __init__(self, base: Path) -> None:
        self.path = base / "logs"
        self.path.mkdir()
        self.log_file = self.path / "events.out.tfevents.fifo"
        os.mkfifo(self.log_file)
        self._drain = threading.Event()
        self._drain.set()
        self._stop = False
        self._thread = threading.Thread(target=self._reader, name="fifo-reader", daemon=True)
        self._thread.start()

    def _reader(self) -> None:
        with open(self.log_file, "rb", buffering=0) as f:
            while not self._stop:
                self._drain.wait()
                if not f.read(65536):
                    return

    def pause(self) -> None:
        self._drain.clear()

    def resume(self) -> None:
        self._drain.set()

    def close(self) -> None:
        self._stop = True
        self._drain.set()


# -- measuring ------------------------------------------------------------------------------
class Timed:
    """Wraps a Sampler source to time each collect (the per-tick cost, per source)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = source.name
        self.costs: list[float] = []

    def collect(self, sample: Any) -> None:
        start = time.perf_counter()
        try:
            self.source.collect(sample)
        finally:
            self.costs.append(time.perf_counter() - start)

    def close(self) -> None:
        closer = getattr(self.source, "close", None)
        if callable(closer):
            closer()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def line_for(sample: Any, t0: float) -> str:
    parts = [f"t={sample.t - t0:6.1f}s"]
    for g in sample.gpus:
        mem = f"{(g.mem_used_bytes or 0) / 2**30:.1f}/{(g.mem_total_bytes or 0) / 2**30:.0f}GiB"
        mine = f"{(g.process_mem_bytes or 0) / 2**30:.2f}GiB" if g.process_mem_bytes else "-"
        parts.append(
            f"gpu{g.index} util={g.util_pct}% mem={mem} mine={mine} power={g.power_w}W "
            f"temp={g.temp_c}C pcie_rx={g.pcie_rx_bps} reasons={','.join(g.clock_reasons)}"
            + (" LOST" if g.lost else "")
        )
    if "gpus" in sample.notes:
        parts.append(f"gpus: {sample.notes['gpus']}")
    for p in sample.paths.values():
        probe = f"{p.probe.p50_ms:.2f}ms" if p.probe and p.probe.p50_ms is not None else "-"
        parts.append(f"{p.fstype} responsive={p.responsive} p50={probe}")
    pr = sample.process
    if pr is not None:
        parts.append(f"w={pr.write_chars_s / 1e3:.0f}kB/s r={pr.read_chars_s / 1e3:.0f}kB/s")
        mt = pr.main_thread or {}
        if mt:
            parts.append(
                f"main={os.path.basename(str(mt.get('file')))}:{mt.get('line')} "
                f"{mt.get('function')} state={mt.get('state')} {mt.get('syscall')} "
                f"{mt.get('fd_path')}"
            )
    parts.append("warnings=" + ",".join(w.code for w in sample.warnings))
    return " | ".join(parts)


# -- training ------------------------------------------------------------------------------
def cuda_step() -> Any:
    """One SGD step of a small MLP on cuda; returns a function giving the loss (synchronises
    every call, as logging a loss does)."""
    try:
        import torch
    except ImportError:
        fail(2, "missing Python package: torch (or pass --smoke)")
    if not torch.cuda.is_available():
        fail(2, "torch.cuda.is_available() is False")
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 4096, device=device)

    def step() -> float:
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.item())

    return step


def cpu_step() -> Any:
    def step() -> float:
        return float(sum(i * i for i in range(20000)) % 997)

    return step


# -- the check ------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description="trainwatch real-GPU check")
    parser.add_argument("--stall", choices=("auto", "sshfs", "fifo"), default="auto")
    parser.add_argument("--seconds-before", type=float, default=15.0)
    parser.add_argument("--stall-for", type=float, default=45.0)
    parser.add_argument("--stalled-after", type=float, default=10.0, help="gpu_stalled_for_s")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="no torch: a CPU loop stands in for training (checks this script itself, e.g. "
        "against the fake NVML of tests/core/fake_nvml on a machine without a GPU)",
    )
    args = parser.parse_args()

    try:
        import psutil  # noqa: F401
        import pynvml  # noqa: F401
    except ImportError as exc:
        fail(2, f"missing Python package: {exc.name} (needs psutil, nvidia-ml-py)")
    step = cpu_step() if args.smoke else cuda_step()

    from trainwatch_lab.core.defaults import DEFAULTS
    from trainwatch_lab.monitor import make_sampler

    base = Path(tempfile.mkdtemp(prefix="trainwatch-gpu-check-"))
    stall: Any = None
    if args.stall in ("auto", "sshfs") and os.geteuid() == 0:
        try:
            stall = SshfsStall(base / "sshfs")
        except Exception as exc:
            if args.stall == "sshfs":
                fail(2, f"cannot set up sshfs: {exc}")
            print(f"sshfs not available ({exc}); using the FIFO fallback", flush=True)
    if stall is None:
        (base / "fifo").mkdir(exist_ok=True)
        stall = FifoStall(base / "fifo")
    print(f"stall mode: {stall.kind}; logs in {stall.log_file}", flush=True)

    defaults = dataclasses.replace(
        DEFAULTS,
        gpu_stalled_for_s=args.stalled_after,
        gpu_processes_every_s=2.0,
        mount_timeout_s=2.0,
    )
    sampler = make_sampler([str(stall.path)], pid=os.getpid(), interval=1.0, defaults=defaults)
    sampler.sources = [Timed(s) for s in sampler.sources]
    gpu_source = next(s.source for s in sampler.sources if s.name == "gpus")
    advice_costs: list[float] = []
    evaluate = sampler.evaluate

    def timed_evaluate(sample: Any, history: Any) -> Any:
        start = time.perf_counter()
        try:
            return evaluate(sample, history)  # type: ignore[misc]
        finally:
            advice_costs.append(time.perf_counter() - start)

    sampler.evaluate = timed_evaluate
    t0 = time.time()
    seen: dict[str, Any] = {}
    stalled = threading.Event()
    calls_per_tick: list[int] = []
    last_calls = [0]

    def on_sample(sample: Any) -> None:
        calls_per_tick.append(gpu_source.nvml_calls - last_calls[0])
        last_calls[0] = gpu_source.nvml_calls
        print(line_for(sample, t0), flush=True)
        for w in sample.warnings:
            seen.setdefault(w.code, w)
            if w.code == "gpu-stalled":
                stalled.set()

    sampler.subscribe(on_sample)
    done = threading.Event()

    def controller() -> None:
        time.sleep(args.seconds_before)
        print(f"--- pausing the storage ({stall.kind}) ---", flush=True)
        stall.pause()
        stalled.wait(args.stall_for)
        time.sleep(2)  # one more sample with the warning
        print("--- resuming the storage ---", flush=True)
        stall.resume()
        time.sleep(5)
        done.set()

    def flush(f: Any, record: bytes) -> None:  # where TensorBoard's writer blocks
        f.write(record)
        f.flush()
        if stall.kind != "fifo":
            os.fsync(f.fileno())

    sampler.start()
    threading.Thread(target=controller, name="controller", daemon=True).start()
    steps = 0
    try:
        with open(stall.log_file, "ab", buffering=0) as log:
            while not done.is_set():
                loss = step()
                steps += 1
                if steps % 10 == 0:
                    flush(log, f"step {steps} loss {loss:.5f}\n".encode() * 64)
    finally:
        stall.resume()
        sampler.close()
        stall.close()
        shutil.rmtree(base, ignore_errors=True)

    print(f"\n=== {steps} training steps; warnings seen ===")
    for code, w in seen.items():
        print(f"[{w.severity}] {code} ({w.subject}): {w.message}\n    fix: {w.fix}")
    print("\n=== per-tick cost (ms) ===")
    print("| part | ticks | median | p99 |\n|---|---:|---:|---:|")
    totals: list[float] = []
    for s in sampler.sources:
        print(
            f"| {s.name} | {len(s.costs)} | {pct(s.costs, 0.5) * 1e3:.2f} | "
            f"{pct(s.costs, 0.99) * 1e3:.2f} |"
        )
        totals = [a + b for a, b in zip(totals, s.costs, strict=False)] if totals else s.costs[:]
    print(
        f"| advice | {len(advice_costs)} | {pct(advice_costs, 0.5) * 1e3:.2f} | "
        f"{pct(advice_costs, 0.99) * 1e3:.2f} |"
    )
    print(
        f"| all sources | {len(totals)} | {pct(totals, 0.5) * 1e3:.2f} | "
        f"{pct(totals, 0.99) * 1e3:.2f} |"
    )
    if calls_per_tick:
        print(
            f"NVML calls per tick: mean {statistics.fmean(calls_per_tick[1:] or [0]):.2f}, "
            f"first tick {calls_per_tick[0]}"
        )
    print(
        f"NVML processes (pid -> bytes): {gpu_source.process_memory()}; our pid {os.getpid()}"
        " (if our pid is missing, NVML reports host pids: a container without the host pid"
        " namespace, and gpu-stalled cannot attribute memory)"
    )
    alert = seen.get("gpu-stalled")
    ok = alert is not None and str(stall.path) in alert.message
    print("RESULT:", "OK gpu-stalled named the stalled path" if ok else "FAIL no gpu-stalled")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
