"""A plain training script as item 1 of issue 35 has it: no TensorBoard, no GPU, only a
4 MiB state file saved every ``EVERY`` seconds into DIR (a name no discovery rule knows),
each save open for milliseconds. ``save_only.py DIR MODE``: ``full`` saves new files until
``OSError: [Errno 28]``; ``forever`` overwrites one file until killed; ``exit0`` saves 16
times over two files (8 s: longer than a discovery pass on a loaded machine) and exits 0."""

import os
import sys
import time

EVERY = 0.5
root, mode = sys.argv[1], sys.argv[2]
step = 0
while True:
    name = {"full": f"state-{step}.npy", "exit0": f"state-{step % 2}.npy"}.get(mode, "state.npy")
    with open(os.path.join(root, name), "wb") as fh:
        fh.write(os.urandom(4 << 20))
    print(f"step {step} saved", flush=True)
    step += 1
    if mode == "exit0" and step == 16:
        sys.exit(0)
    time.sleep(EVERY)
