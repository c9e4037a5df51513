"""Issue 38 with the Lightning callback: a real ``Trainer.fit`` on CPU saving a ~2 MiB
checkpoint every step onto a loop ext4 that holds 2.5 of them. The default stops it at the
3rd save, nothing half-written; ``keep=2`` lives on; ``fallback=`` saves there;
``on_full="wait"`` with ``notify=`` pauses at the save, a real webhook hears it, another
process frees space, and the run finishes. Each checkpoint is loaded back whole. The run is
a child process (Lightning and torch are imported there only)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from importlib.util import find_spec
from typing import Any

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.frameworks import child_env
from tests.support.full_disk import (
    CHECK,
    finish,
    recorded_kinds,
    small_disk,
    start_child,
    wait_then_free,
)

STEPS = 6

FIT = textwrap.dedent(
    """
    import json, logging, sys
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from trainwatch_lab.integrations.lightning import TrainWatchCallback

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    ckpt, root, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(512, 1024)

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    trainer = L.Trainer(
        max_steps=STEPS, logger=False, default_root_dir=root, accelerator="cpu",
        enable_progress_bar=False, enable_model_summary=False,
        callbacks=[TrainWatchCallback(check=False, **options),
                   ModelCheckpoint(dirpath=ckpt, every_n_train_steps=1, save_top_k=-1,
                                   filename="step-{step:03d}", auto_insert_metric_name=False)],
    )
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 512)))
    try:
        trainer.fit(Tiny(), data)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        sys.exit(1)
    print(json.dumps({"done": trainer.global_step}), flush=True)
    """
).replace("STEPS", str(STEPS))

LOAD = CHECK.replace('torch.load(p)["epoch"]', 'torch.load(p, weights_only=False)["global_step"]')


def need_lightning() -> None:
    need(find_spec("lightning") is not None, "needs lightning")


def fit(ckpt: Any, root: Any, **options: Any) -> subprocess.Popen[str]:
    return start_child(FIT, ckpt, root, json.dumps(options))


def result(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    lines, err = finish(proc)
    return (lines[-1] if lines else {}), err


def steps_in(*directories: Any) -> dict[str, int]:
    files = sorted(str(p) for d in directories for p in d.iterdir() if p.suffix == ".ckpt")
    proc = subprocess.run([sys.executable, "-c", LOAD, *files], env=child_env(),
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(proc.stdout)


def names(directory: Any) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.suffix == ".ckpt")


def test_the_default_stops_at_the_save_that_will_not_fit(loop_ext4, tmp_path) -> None:
    need_lightning()
    ckpt, _ = small_disk(loop_ext4)
    last, err = result(proc := fit(ckpt, tmp_path))
    assert proc.returncode == 1 and last["error"] == "CheckpointWontFit", err
    assert names(ckpt) == ["step-001.ckpt", "step-002.ckpt"]
    assert sorted(steps_in(ckpt).values()) == [1, 2]


def test_keep_lets_the_run_live_on(loop_ext4, tmp_path) -> None:
    need_lightning()
    ckpt, filler = small_disk(loop_ext4)
    last, err = result(proc := fit(ckpt, tmp_path, keep=2))
    assert proc.returncode == 0 and last == {"done": STEPS}, err
    assert names(ckpt) == ["step-005.ckpt", "step-006.ckpt"] and filler.exists()
    assert sorted(steps_in(ckpt).values()) == [5, 6]


def test_fallback_saves_there(loop_ext4, tmpfs_mount, tmp_path) -> None:
    need_lightning()
    ckpt, _ = small_disk(loop_ext4)
    scratch = tmpfs_mount("32m").path / "ckpt"
    last, err = result(proc := fit(ckpt, tmp_path, fallback=str(scratch)))
    assert proc.returncode == 0 and last == {"done": STEPS}, err
    assert names(ckpt) == ["step-001.ckpt", "step-002.ckpt"]
    assert names(scratch) == [f"step-00{s}.ckpt" for s in (3, 4, 5, 6)]
    assert f"instead of {ckpt}" in err
    assert sorted(steps_in(ckpt, scratch).values()) == list(range(1, STEPS + 1))


def test_wait_pauses_notifies_and_resumes(loop_ext4, tmp_path) -> None:
    need_lightning()
    ckpt, filler = small_disk(loop_ext4)
    t0 = time.time()
    webhook = Webhook()
    proc = fit(ckpt, tmp_path, on_full="wait", recheck_s=0.2, notify=webhook.url)

    def while_paused(told: dict[str, Any]) -> None:
        assert "step-003.ckpt is paused" in told["message"]
        assert names(ckpt) == ["step-001.ckpt", "step-002.ckpt"]

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0 and lines[-1] == {"done": STEPS}, err
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]  # flushed at teardown
    assert sorted(steps_in(ckpt).values()) == list(range(1, STEPS + 1))
    assert recorded_kinds(t0, ckpt) == ["save-paused", "save-resumed"]
