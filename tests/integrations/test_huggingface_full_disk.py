"""Issue 38 with the Hugging Face callback: a real ``Trainer.train`` on CPU saving a
``checkpoint-N/`` (~3 MiB: weights and AdamW's moments) every step onto a loop ext4 that
holds 2.5 of them. The Trainer writes its checkpoints itself, so ``on_full="wait"`` pauses
the step before the save: a real webhook hears it, another process frees space, and the run
finishes with every checkpoint whole (loaded back). The run is a child process."""

from __future__ import annotations

import textwrap
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.full_disk import MIB, fill_to, recorded_kinds, start_child, wait_then_free

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
    filler = fill_to(m.path, 8 * MIB)  # room for about 2.5 checkpoints of ~3 MiB
    t0 = time.time()
    webhook = Webhook()
    proc = start_child(TRAIN, out, webhook.url)

    def while_paused(told: dict[str, Any]) -> None:
        assert "is paused" in told["message"] and told["subject"] == str(out)
        assert checkpoints(out) == ["checkpoint-1", "checkpoint-2"]

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0, err
    assert lines[-1]["steps"] == {f"checkpoint-{s}": s for s in range(1, STEPS + 1)}
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]
    assert recorded_kinds(t0, out) == ["save-paused", "save-resumed"]
