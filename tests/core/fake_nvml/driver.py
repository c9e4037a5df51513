"""Subprocess side of the fake-NVML tests: one GpuSource, ticked on request.

Usage: ``python -m tests.core.fake_nvml.driver '{"gpu_processes_every_s": 0}' [PID]`` (a
``"select"`` key: a ``--gpu`` selection for the source); reads
``tick`` / ``close`` lines on stdin and answers one JSON line each, so a test can rewrite the
fake's script between ticks. It prints the Sample, the source's own NVML call counter and the
fake library's counter (to check that ours is honest).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import sys
import time

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.gpu.select import parse_gpu_selection
from trainwatch_lab.core.gpu.source import GpuSource
from trainwatch_lab.core.model import Sample


def _fake_calls() -> int | None:
    try:
        return int(ctypes.CDLL("libnvidia-ml.so.1").fake_nvml_calls())
    except (OSError, AttributeError):
        return None


def main() -> None:
    overrides = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    pid = int(sys.argv[2]) if len(sys.argv) > 2 else None
    select = overrides.pop("select", None)  # a --gpu selection string
    source = GpuSource(
        pid=pid,
        defaults=dataclasses.replace(DEFAULTS, **overrides),
        select=parse_gpu_selection(select) if select is not None else None,
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "tick":
            sample = Sample(t=time.time())
            start = time.perf_counter()
            source.collect(sample)
            cost = time.perf_counter() - start
            out = {
                "sample": sample.to_json(),
                "nvml_calls": source.nvml_calls,
                "fake_calls": _fake_calls(),
                "process_memory": {str(k): v for k, v in source.process_memory().items()},
                "cost_s": cost,
            }
        elif command == "close":
            source.close()
            out = {"nvml_calls": source.nvml_calls, "fake_calls": _fake_calls()}
        else:
            out = {"error": f"unknown command {command!r}"}
        print(json.dumps(out), flush=True)
        if command == "close":
            break


if __name__ == "__main__":
    main()
