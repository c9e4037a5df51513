"""Precision of gpu-starved against input-cpu-bound on real workloads (issue 16, item 7).

Everything is real except the GPU: a "training script" with DataLoader-like worker processes
(forked, the same executable, feeding the loop through a queue) reads shards from a
loop-mounted ext4 while the product's ``make_sampler`` (all sources, the default Advisor) runs
in it; the fake libnvidia-ml.so.1 swings the GPU between idle and busy (mean 45 %, ±40 %) with
3 GiB held by the script. The truth is known by construction:

- storage-bound: the workers read shards whose pages (and the loop device's backing file's)
  were dropped, so every read goes to the device and they sit in D state: gpu-starved;
- CPU-bound workers: the shards are in the page cache (steady read_chars, no block reads) and
  the workers hash every MiB many times while the loop waits on them: input-cpu-bound, never
  gpu-starved;
- CPU-bound loop: the same decode in the main thread, no workers: input-cpu-bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.advice.gpu.test_stall import stop_group
from tests.core.fake_nvml import GIB, FakeNvml, fake_nvml, fake_nvml_lib, gpu
from tests.support.env import need_root

__all__ = ["fake_nvml", "fake_nvml_lib"]

CODES = ("gpu-starved", "input-cpu-bound", "gpu-stalled")
OVERRIDES = {"gpu_starved_window_s": 5.0, "gpu_processes_every_s": 0.5}
SHARDS, SHARD_MB = 4, 16

SCRIPT = r"""
import dataclasses, hashlib, json, multiprocessing as mp, os, sys
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.monitor import make_sampler

datadir, image, out_path, mode, overrides = sys.argv[1:6]
shards = sorted(os.path.join(datadir, n) for n in os.listdir(datadir) if n.startswith("shard"))
DROP = os.POSIX_FADV_DONTNEED


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, DROP)
    os.close(fd)


def load(path, cold):
    if cold:  # the shard's pages, and the loop device's backing file's: the device must read
        drop(path)
        drop(image)
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            if not cold:  # "decode": CPU work on every MiB
                for _ in range(20):
                    chunk = hashlib.sha256(chunk).digest() * 32768


def worker(q, cold):
    while True:
        for path in shards:
            load(path, cold)
            q.put(path)


defaults = dataclasses.replace(DEFAULTS, **json.loads(overrides))
sampler = make_sampler([datadir], pid=os.getpid(), interval=0.5, probe=False, defaults=defaults)
out = open(out_path, "a", buffering=1)
sampler.subscribe(lambda sample: out.write(json.dumps(sample.to_json()) + "\n"))
sampler.start()
if mode == "cpu-loop":
    while True:
        for path in shards:
            load(path, False)
q = mp.get_context("fork").Queue(maxsize=4)
for _ in range(3):
    mp.get_context("fork").Process(target=worker, args=(q, mode == "storage"), daemon=True).start()
while True:  # the training loop: one batch at a time from the workers
    q.get()
"""


def _fired(path: Path, since: float) -> set[str]:
    if not path.exists():
        return set()
    fired: set[str] = set()
    for line in path.read_text().splitlines():
        if line.endswith("}"):
            sample = json.loads(line)
            if sample["t"] >= since:
                fired |= {w["code"] for w in sample["warnings"]}
    return fired


@pytest.mark.parametrize(
    ("mode", "must"),
    [
        ("storage", "gpu-starved"),
        ("cpu-workers", "input-cpu-bound"),
        ("cpu-loop", "input-cpu-bound"),
    ],
)
def test_starved_by_storage_or_by_the_cpu(
    judge, loop_ext4, fake_nvml: FakeNvml, tmp_path: Path, mode: str, must: str
) -> None:
    need_root()
    disk = loop_ext4(size_mb=SHARDS * SHARD_MB + 32)
    for i in range(SHARDS):
        with open(disk.mountpoint / f"shard-{i:03d}.tar", "wb") as f:
            f.write(os.urandom(SHARD_MB << 20))
            os.fsync(f.fileno())
    script, out = tmp_path / "train.py", tmp_path / "samples.jsonl"
    script.write_text(SCRIPT)
    fake_nvml.write([gpu(0, util=85)])
    args = [str(disk.mountpoint), str(disk.image), str(out), mode, json.dumps(OVERRIDES)]
    child = subprocess.Popen(
        [sys.executable, str(script), *args],
        env=fake_nvml.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    fake_nvml.write([gpu(0, util_seq="0,80,10,90", procs={child.pid: 3 * GIB})])
    judged_from = time.time() + OVERRIDES["gpu_starved_window_s"] + 1  # a window of swings
    deadline = judged_from + 40
    try:
        while time.time() < deadline:  # at least 15 s judged; stop early once it fired
            time.sleep(1)
            if time.time() > judged_from + 15 and must in _fired(out, judged_from):
                break
    finally:
        err = stop_group(child)
    assert "Traceback" not in err, err
    fired = _fired(out, judged_from)
    judge(f"real {mode} input pipeline", fired & set(CODES), must={must}, must_not=CODES)
    last = [json.loads(line) for line in out.read_text().splitlines() if line.endswith("}")][-1]
    alert = next((w for w in last["warnings"] if w["code"] == must), None)
    if alert is not None:  # what the user reads names the numbers measured
        print(alert["message"], alert["fix"], sep="\n")
        if must == "gpu-starved":
            assert f"of {disk.device}'s " in alert["message"]
            assert "DataLoader workers slept on file reads" in alert["message"]
