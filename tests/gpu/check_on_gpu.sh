#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and PyTorch: a short real training loop on cuda, a storage
# stall induced under it, and trainwatch's Sampler (make_sampler: paths, disks, process,
# main_thread, gpus + Advisor) watching it. Prints every sample, the warnings and the per-tick
# cost. Exit 0 when gpu-stalled fired and named the stalled path, 1 when not, 2 when the
# machine lacks what the check needs.
#
# The stall: as root with sshd/sshfs/fuse available, the logs go to a real sshfs mount of a
# private sshd on 127.0.0.1 whose sftp-server is then SIGSTOPped (a dead NFS/SMB/sshfs server).
# Elsewhere (no root or no FUSE) the logs go to a FIFO whose reader stops reading: the loop's
# write then blocks in the kernel just the same, on a local path (documented FUSE-less
# fallback; force it with --stall fifo).
#
#   tests/gpu/check_on_gpu.sh [--stall auto|sshfs|fifo] [--seconds-before 15] [--stall-for 45]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "check_on_gpu: no nvidia-smi here: this check needs a machine with an NVIDIA GPU" >&2
  exit 2
fi
nvidia-smi -L || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# the python side cleans up (resume, unmount, kill sshd) in finally; the timeout is the backstop
exec timeout -k 10 240 python tests/gpu/check_on_gpu.py "$@"
