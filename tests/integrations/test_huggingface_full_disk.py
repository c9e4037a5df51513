"""Issue 38 with the Hugging Face callback: a real ``Trainer.train`` on CPU saving a
``checkpoint-N/`` (~3 MiB: weights and AdamW's moments) every step onto a loop ext4 that
holds 2.5 of them. The Trainer writes its checkpoints itself: ``keep=2`` removes its oldest
``checkpoint-N`` first and the run lives on; ``on_full="wait"`` pauses the step before the
save: a real webhook hears it, another process frees space, and the run finishes with every
checkpoint whole (loaded back). The run is a child process."""

from __future__ import annotations

import json
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.full_disk import (
    MIB,
    fill_to,
    finish,
    recorded_kinds,
    start_child,
    wait_then_free,
)

STEPS = 5

TRAIN = textwrap.dedent(
    """
    import glob, json, logging, os, sys
    from transformers import GPT2LMHeadModel, Trainer
    from tests.support.frameworks import tiny_gpt2, token_dataset, trainer_args
    from trainwatch_lab.integrations.huggingface import TrainWatchCallback

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    out, options = sys.argv[1], json.loads(sys.argv[2])
    cb = TrainWatchCallback(check=False, **options)
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


def need_transformers() -> None:
    need(find_spec("transformers") is not None and find_spec("torch") is not None,
         "needs transformers and torch")  # fmt: skip


def small_disk(loop_ext4: Any) -> tuple[Path, Path]:
    """A 48 MiB ext4 with room for about 2.5 checkpoints of ~3 MiB."""
    m = loop_ext4(size_mb=48)
    return m.path / "trainer_output", fill_to(m.path, 8 * MIB)


def test_keep_removes_the_trainers_oldest_checkpoints_first(loop_ext4) -> None:
    need_transformers()
    out, filler = small_disk(loop_ext4)
    t0 = time.time()
    proc = start_child(TRAIN, out, json.dumps({"keep": 2}))
    lines, err = finish(proc)
    assert proc.returncode == 0, err
    assert lines[-1]["steps"] == {"checkpoint-4": 4, "checkpoint-5": 5}  # both load
    assert "first to make room" in err and filler.exists()
    assert recorded_kinds(t0, out) == ["save-room-made"] * 3


def test_wait_pauses_before_the_trainer_saves_and_resumes(loop_ext4) -> None:
    need_transformers()
    out, filler = small_disk(loop_ext4)
    t0 = time.time()
    webhook = Webhook()
    options = {"on_full": "wait", "recheck_s": 0.2, "notify": webhook.url}
    proc = start_child(TRAIN, out, json.dumps(options))

    def while_paused(told: dict[str, Any]) -> None:
        assert "is paused" in told["message"] and told["subject"] == str(out)
        assert checkpoints(out) == ["checkpoint-1", "checkpoint-2"]

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0, err
    assert lines[-1]["steps"] == {f"checkpoint-{s}": s for s in range(1, STEPS + 1)}
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]
    assert recorded_kinds(t0, out) == ["save-paused", "save-resumed"]
