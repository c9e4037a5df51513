"""A real recording process for the kill test: samples /tmp-like PATH at 20 Hz with the
real sampler and Recorder, flushes every few ticks and prints, after each flush that
succeeded, the time of the newest point it wrote (flushed, hence promised to survive)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.record import Recorder
from trainwatch_lab.monitor import make_sampler


def main(store: str, path: str) -> None:
    defaults = replace(
        DEFAULTS, record_block_points=12, record_maintain_every_s=0.3, record_min_free_bytes=0
    )
    sampler = make_sampler([path], interval=0.05, gpu=False, probe=False, process=False)
    recorder = Recorder(store, role="kill-test", every=0.0, defaults=defaults)
    sampler.subscribe(recorder)
    n = 0
    while True:
        sample = sampler.tick()
        n += 1
        if n % 4 == 0 and recorder.flush():
            sys.stdout.write(f"{sample.t!r}\n")
            sys.stdout.flush()
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
