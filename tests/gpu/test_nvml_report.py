"""tests/gpu/gpu_report.py run for real through pynvml against the fake libnvidia-ml.so.1 (no
GPU needed): the NVML half must reach its report, name what the driver lacks, see MIG
instances, say whether NVML's PIDs are ours and measure the per-tick cost; without a driver it
must stop with its one-line "prerequisite missing" (exit 2). With the fake libcuda.so.1 of
tests/gpu/fake_cuda.c (its allocations appear in the fake NVML's process list) the whole
report runs, CUDA half included, and every judged part must come out OK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.fake_nvml import GIB, ROOT, FakeNvml, build, fake_nvml, fake_nvml_lib, gpu
from tests.gpu.nvml_report import pid_verdict
from tests.support.env import need_tool

__all__ = ["fake_nvml", "fake_nvml_lib"]

REPORT = ROOT / "tests" / "gpu" / "gpu_report.py"


def report(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPORT), *(args or ["--nvml-only"])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pid_verdict() -> None:
    assert pid_verdict({0: [(7, GIB)], 1: []}, {7}) == "equal"
    assert pid_verdict({0: [(90001, GIB)]}, {7}) == "host"  # a container: the host's PIDs
    assert pid_verdict({0: []}, {7}) == "unknown"


def test_the_report_against_a_driver_without_v3(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    lib = build(tmp_path / "no_v3", "FAKE_NVML_NO_V3")
    mig = {"mig": 2, "mig_used": f"{GIB},{2 * GIB}", "mig_procs": {1: {4343: 2 * GIB}}}
    fake_nvml.write([gpu(0, procs={os.getpid(): GIB}), gpu(1, **mig)])
    env = fake_nvml.env() | {"LD_LIBRARY_PATH": str(lib)}
    out = report(env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "nvidia-ml-py: " in text and "driver: missing" in text  # the fake has no version call
    missing = next(line for line in text.splitlines() if line.startswith("  missing: "))
    assert missing.split()[1:] == ["nvmlDeviceGetComputeRunningProcesses_v3"]
    assert "NSpid:" in text
    assert "gpu 0: MIG mode current=0" in text and "gpu 1: MIG mode current=1" in text
    assert "instance 1: MIG-" in text and "2.00/40.00 GiB" in text
    assert f"0: [({os.getpid()}, {GIB})], 1: [(4343, {2 * GIB})]" in text  # per MIG instance
    assert "NVML's PIDs are ours: equal" in text
    assert "PCIe read every tick: {'median_ms'" in text and "(default): {'median_ms'" in text
    assert "RESULT: OK" in text


@pytest.mark.parametrize("script", [False, True])
def test_no_driver_is_a_prerequisite_missing(fake_nvml: FakeNvml, script: bool) -> None:
    if script:  # the shell entry point: no nvidia-smi on this machine
        if shutil.which("nvidia-smi"):
            pytest.skip("this machine has nvidia-smi")
        out = subprocess.run(
            ["bash", str(ROOT / "tests" / "gpu" / "check_on_gpu.sh")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    else:
        out = report(fake_nvml.env(library=False))
    assert out.returncode == 2, out
    assert "prerequisite missing: " in out.stderr
    assert "Traceback" not in out.stderr


def test_no_cuda_is_a_prerequisite_missing_after_the_nvml_half(fake_nvml: FakeNvml) -> None:
    """NVML answers (the fake) but CUDA cannot be used here: the NVML half is reported, then
    one line says what is missing."""
    fake_nvml.write([gpu(0)])
    out = report(fake_nvml.env(), "--backend", "ctypes")
    assert out.returncode == 2, out
    assert "== MIG (read only)" in out.stdout
    assert "prerequisite missing: libcuda.so.1 does not load" in out.stderr


@pytest.mark.slow
def test_the_whole_report_against_fake_nvml_and_fake_cuda(
    fake_nvml: FakeNvml, fake_nvml_lib: Path, tmp_path: Path
) -> None:
    need_tool("gcc")
    cuda = tmp_path / "cuda"
    cuda.mkdir()
    source, lib = ROOT / "tests" / "gpu" / "fake_cuda.c", cuda / "libcuda.so.1"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(lib), str(source)], check=True
    )
    fake_nvml.write([gpu(0, duty="200/800"), gpu(1)])
    env = fake_nvml.env() | {"LD_LIBRARY_PATH": f"{fake_nvml_lib}:{cuda}", "FAKE_CUDA_COUNT": "2"}
    out = report(env, "--backend", "ctypes", "--idle-s", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "== load from: ctypes libcuda" in text
    assert "NVML's PIDs are ours: equal" in text
    assert "[OK] 1 GiB read back: 1342177280 bytes" in text  # 1 GiB and the 256 MiB context
    assert "[OK] 3 GiB read back: 3489660928 bytes" in text
    assert "[OK] duty cycle" in text and "nvmlDeviceGetSamples over the run: " in text
    assert "[OK] PCI order" in text
    assert "[OK] idle model: warnings seen: none" in text
    assert "RESULT: OK" in text
