#!/usr/bin/env bash
# On a fresh machine with an NVIDIA GPU, in under five minutes (issue 16):
#
# 1. tests/gpu/gpu_report.py (at most 150 s): NVML's PIDs against ours and the NSpid line; the
#    NVML symbols this driver exports, with driver and nvidia-ml-py versions; two processes
#    holding 1 and 3 GiB read back; a 200/800 ms duty-cycled kernel's utilization per tick
#    against nvmlDeviceGetSamples; MIG mode (read only); NVML's index against CUDA's UUID
#    order; no gpu-stalled for a model idle 60 s with no cell running; the per-tick cost with
#    and without the PCIe reads. Load: torch when installed, else the CUDA driver API through
#    ctypes (libcuda.so.1 comes with the driver: nothing to download). TW_BACKEND=torch|ctypes
#    forces one.
# 2. tests/gpu/check_on_gpu.py (at most 140 s): a short real training loop on cuda, a storage
#    stall induced under it (a paused sshfs server as root with sshd/sshfs/fuse, else a FIFO
#    nobody reads), trainwatch's Sampler watching: gpu-stalled must fire and name the path.
#
# Nothing changes a GPU setting. Exit 0: both OK; 1: a check failed; 2: a prerequisite is
# missing (one line says which); 124: a part ran out of time.
#
#   tests/gpu/check_on_gpu.sh [--stall auto|sshfs|fifo] [--seconds-before 15] [--stall-for 45]
set -uo pipefail
cd "$(dirname "$0")/../.."
missing() {
  echo "check_on_gpu: prerequisite missing: $*" >&2
  exit 2
}
command -v nvidia-smi >/dev/null 2>&1 ||
  missing "no nvidia-smi here: this check needs a machine with an NVIDIA GPU and its driver"
nvidia-smi -L || missing "nvidia-smi -L failed: the NVIDIA driver does not answer"
PYTHON=${PYTHON:-python3}
"$PYTHON" -c "import psutil, pynvml" 2>/dev/null ||
  missing "Python packages psutil and nvidia-ml-py (pip install psutil nvidia-ml-py)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
timeout -k 10 150 "$PYTHON" tests/gpu/gpu_report.py --backend "${TW_BACKEND:-auto}"
report=$?
# the python side cleans up (resume, unmount, kill sshd) in finally; the timeout is the backstop
timeout -k 10 140 "$PYTHON" tests/gpu/check_on_gpu.py "$@"
stall=$?
echo "check_on_gpu: report exit $report, stall check exit $stall"
[ "$report" -ne 0 ] && exit "$report"
exit "$stall"
