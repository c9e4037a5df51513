"""A plain training script as item 1 of issue 35 has it: no TensorBoard, no GPU, only a
4 MiB state file saved every ``EVERY`` seconds into DIR (a name no discovery rule knows),
each save open for milliseconds. ``save_only.py DIR MODE``: ``full`` saves new files until
``OSError: [Errno 28]``; ``forever`` overwrites one file until killed; ``exit0`` saves 6
files and exits 0."""

import os
import sys
import time

EVERY = 0.5
root, mode = sys.argv[1], sys.argv[2]
step = 0
while True:
    name = f"state-{step}.npy" if mode != "forever" else "state.npy"
    with open(os.path.join(root, name), "wb") as fh:
        fh.write(os.urandom(4 << 20))
    print(f"step {step} saved", flush=True)
    step += 1
    if mode == "exit0" and step == 6:
        sys.exit(0)
    time.sleep(EVERY)
