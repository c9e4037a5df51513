"""A training script that dies of a full disk: keeps a TensorBoard event file open (so the
discovery lists it), then saves 256 KiB checkpoints, 5 a second, until ``OSError: [Errno 28]``
(about 1.3 MB/s: a recorder sampling every 0.5 s sees the last megabytes go)."""

import os
import sys
import time

root = sys.argv[1]
os.makedirs(f"{root}/runs", exist_ok=True)
os.makedirs(f"{root}/ckpt", exist_ok=True)
events = open(f"{root}/runs/events.out.tfevents.1.host", "wb")  # noqa: SIM115
time.sleep(float(sys.argv[2]))  # long enough to be found (a scan every 3 s)
step = 0
while True:
    events.write(b"step %d\n" % step)
    events.flush()
    with open(f"{root}/ckpt/step-{step}.pt", "wb") as fh:
        fh.write(os.urandom(256 << 10))
    step += 1
    time.sleep(0.2)
