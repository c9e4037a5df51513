"""Issue 38 with the Hugging Face callback: a real ``Trainer.train`` on CPU saving a
``checkpoint-N/`` (~3 MiB: weights and AdamW's moments) every step onto a loop ext4 that
holds 2.5 of them. The Trainer writes its checkpoints itself, so ``on_full="wait"`` pauses
the step before the save: a real webhook hears it, another process frees space, and the run
finishes with every checkpoint whole (loaded back). The run is a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.frameworks import child_env
from tests.support.full_disk import CHILD_TIMEOUT_S
from tests.support.mounts import wait_until
from trainwatch_lab.core.record import Store, choose

MIB = 1024 * 1024
STEPS = 5

TRAIN = textwrap.dedent(
    """
    import glob, json, logging, os, sys
    from transformers import GPT2LMHeadModel, Trainer
    from tests.support.frameworks import tiny_gpt2, token_dataset, trainer_args
    from trainwatch_lab.integrations.huggingface import TrainWatchCallback

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    out, hook = sys.argv[1], sys.argv[2]
    cb = TrainWatchCallback(check=False, on_full="wait", recheck_s=0.2, notify=hook)
    trainer = Trainer(model=tiny_gpt2(n_embd=128, vocab=512),
                      args=trainer_args(out, save_steps=1, max_steps=STEPS),
                      train_dataset=token_dataset(16, vocab=512), callbacks=[cb])
    trainer.train()
    steps = {}
    for d in sorted(glob.glob(os.path.join(out, "checkpoint-*"))):
        GPT2LMHeadModel.from_pretrained(d)  # whole: loads
        with open(os.path.join(d, "trainer_state.json")) as fh:
            steps[os.path.basename(d)] = json.load(fh)["global_step"]
    print(json.dumps({"done": True, "steps": steps}), flush=True)
    """
).replace("STEPS", str(STEPS))


def checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("checkpoint-*")) if out.exists() else []


def test_wait_pauses_before_the_trainer_saves_and_resumes(loop_ext4) -> None:
    need(find_spec("transformers") is not None and find_spec("torch") is not None,
         "needs transformers and torch")  # fmt: skip
    m = loop_ext4(size_mb=48)
    out = m.path / "trainer_output"
    free = os.statvfs(m.path).f_bavail * os.statvfs(m.path).f_frsize
    filler = m.path / "old-dataset.bin"
    with open(filler, "wb") as fh:  # room for about 2.5 checkpoints of ~3 MiB
        fh.write(b"d" * (free - 8 * MIB))
        os.fsync(fh.fileno())
    t0 = time.time()
    webhook = Webhook()
    proc = subprocess.Popen([sys.executable, "-c", TRAIN, str(out), webhook.url],
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert wait_until(lambda: webhook.requests, CHILD_TIMEOUT_S)
        told = webhook.bodies()[0]
        assert told["state"] == "started" and told["code"] == "checkpoint-wont-fit"
        assert "is paused" in told["message"] and told["subject"] == str(out)
        assert proc.poll() is None  # paused before the save, not dead
        paused_at = checkpoints(out)
        assert paused_at == ["checkpoint-1", "checkpoint-2"]
        subprocess.run(["rm", str(filler)], check=True, timeout=30)  # another process frees
        stdout, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        webhook.close()
    assert proc.returncode == 0, err
    last = json.loads(stdout.strip().splitlines()[-1])
    assert last["steps"] == {f"checkpoint-{s}": s for s in range(1, STEPS + 1)}
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]
    store = Store(choose().path)
    try:
        kinds = [e.kind for e in store.events(t0 - 1, time.time() + 5) if e.subject == str(out)]
    finally:
        store.close()
    assert kinds == ["save-paused", "save-resumed"]
