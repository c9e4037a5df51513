"""The callbacks inside the real frameworks: Lightning, the Hugging Face Trainer and Keras 3
(on JAX), all on CPU, in one child process (their imports and threads never enter the test
process). Each saves ~3 MiB checkpoints every step or epoch onto an 8 MiB tmpfs: two fit, the
third must be stopped before it writes, leaving the two whole. Log directories sit on a real
sshfs share: the check at train start reports it (a log line outside a notebook), and while
the share is paused no hook of the callback waits on it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tests.support.env import need
from tests.support.frameworks import (
    ROOT,
    child_env,
    keras_spacer,
    lightning_module,
    tiny_gpt2,
    token_dataset,
    trainer_args,
    trainer_spacer,
)
from tests.support.mounts import SshfsMount
from trainwatch_lab.fix.checkpoint import manifest
from trainwatch_lab.fix.checkpoint.manifest import MANIFEST

CHILD_TIMEOUT_S = 280
STEP_GAP_S = 0.5  # between saves: the space readings (every 0.05 s) see each save land


def timed(watch: Any) -> list[float]:
    """Wrap ``watch.before_checkpoint`` to record how long each call takes."""
    took: list[float] = []
    inner = watch.before_checkpoint

    def before_checkpoint(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            inner(*args, **kwargs)
        finally:
            took.append(time.perf_counter() - t0)

    watch.before_checkpoint = before_checkpoint
    return took


def read_manifest(ckpt: Path) -> str | None:
    path = ckpt / MANIFEST
    return path.read_text() if path.exists() else None


def outcome(run: Any, watch: Any, took: list[float], ckpt: Path) -> dict[str, Any]:
    try:
        run()
        error = None
    except Exception as exc:
        error = {"type": type(exc).__name__, "message": str(exc)}
    watch.checked.wait(20)
    return {
        "error": error,
        "files": sorted(str(p.relative_to(ckpt)) for p in ckpt.rglob("*")),
        "manifest": sorted(manifest.parse(text)) if (text := read_manifest(ckpt)) else None,
        "warnings": [[a.code, a.subject] for a in watch.warnings],
        "hook_max_s": max(took, default=0.0),
        "hooks": len(took),
    }


# -- run in the child ---------------------------------------------------------------------
def run_lightning(disk: Path, share: Path) -> dict[str, Any]:
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    from trainwatch_lab.integrations.lightning import TrainWatchCallback

    cb = TrainWatchCallback(space_every=0.05)
    took = timed(cb.watch)
    ckpt = disk / "ckpt"
    trainer = L.Trainer(
        max_steps=5,
        logger=CSVLogger(share / "lightning"),
        callbacks=[cb, ModelCheckpoint(dirpath=ckpt, every_n_train_steps=1, save_top_k=-1)],
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 768)))
    model = lightning_module(768, 1024, STEP_GAP_S)  # 3 MiB of weights
    return outcome(lambda: trainer.fit(model, data), cb.watch, took, ckpt)


def run_huggingface(disk: Path, share: Path) -> dict[str, Any]:
    from transformers import Trainer

    from trainwatch_lab.integrations.huggingface import TrainWatchCallback

    cb = TrainWatchCallback(space_every=0.05)
    took = timed(cb.watch)
    out = disk / "trainer_output"
    # ~265k parameters: weights + AdamW's two moments, ~3 MiB per checkpoint-N/
    # (the spacer before ours: the readings catch up with the last save)
    trainer = Trainer(
        model=tiny_gpt2(n_embd=128, vocab=512),
        args=trainer_args(out, save_steps=1, max_steps=5),
        train_dataset=token_dataset(16, vocab=512),
        callbacks=[trainer_spacer(STEP_GAP_S), cb],
    )
    return outcome(trainer.train, cb.watch, took, out)


def run_keras(disk: Path, share: Path) -> dict[str, Any]:
    import keras
    import numpy as np

    from trainwatch_lab.integrations.keras import TrainWatchCallback

    ckpt = disk / "ckpt"
    save = keras.callbacks.ModelCheckpoint(
        str(ckpt / "w_{epoch:02d}.weights.h5"), save_weights_only=True
    )
    cb = TrainWatchCallback(save, share / "keras-logs", space_every=0.05)  # the share: paused
    took = timed(cb.watch)
    model = keras.Sequential([keras.Input((768,)), keras.layers.Dense(1024)])  # 3 MiB
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(8, 768), np.random.rand(8, 1024)
    callbacks = [keras_spacer(STEP_GAP_S), cb, save]
    fit = lambda: model.fit(x, y, epochs=5, batch_size=8, callbacks=callbacks, verbose=0)  # noqa: E731
    return outcome(fit, cb.watch, took, ckpt)


def run_all(out: str, disks: str, share: str) -> None:
    """The child's entry point: one result per framework in out/results.json. Before Keras
    it asks the parent to pause the share (a line on stdout, an answer on stdin)."""
    results: dict[str, Any] = {}
    runners = (("lightning", run_lightning), ("huggingface", run_huggingface), ("keras", run_keras))
    for (name, run), disk in zip(runners, disks.split(","), strict=True):
        if name == "keras":
            print("pause", flush=True)
            sys.stdin.readline()
        try:
            results[name] = run(Path(disk), Path(share))
        except Exception:
            results[name] = {"crashed": traceback.format_exc()}
    Path(out, "results.json").write_text(json.dumps(results))


# -- the test -----------------------------------------------------------------------------
def train_all(tmpfs_mount: Any, sshfs: SshfsMount, out: Path) -> dict[str, Any]:
    """Run the child; pause the share when it asks (before Keras), resume at the end."""
    missing = [
        m for m in ("torch", "lightning", "transformers", "keras", "jax") if not find_spec(m)
    ]
    need(not missing, f"needs {', '.join(missing)} (the test extra of pyproject.toml)")
    disks = ",".join(str(tmpfs_mount("8m").path) for _ in range(3))
    code = f"import sys; from {__name__} import run_all; run_all(*sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(out), disks, str(sshfs.path)],
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.strip() == "pause", line + (proc.stderr.read() if proc.stderr else "")
        sshfs.pause()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        sshfs.resume()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-4000:]
    results = json.loads((out / "results.json").read_text())
    results["stderr"] = err
    return results


def check_refused_third_save(name: str, result: dict[str, Any], saves: list[str]) -> None:
    assert "crashed" not in result, f"{name}: {result.get('crashed')}"
    error = result["error"] or {}
    assert error.get("type") == "CheckpointWontFit", f"{name}: {result}"
    assert "will not fit" in error["message"]
    top = sorted({f.split("/")[0] for f in result["files"]} - {MANIFEST})
    assert top == saves, f"{name}: {result['files']}"
    assert result["hook_max_s"] < 0.05, f"{name}: {result}"  # from readings, never waiting


def test_callbacks_in_lightning_hugging_face_and_keras(
    tmpfs_mount: Any, sshfs_mount: SshfsMount, tmp_path: Path
) -> None:
    results = train_all(tmpfs_mount, sshfs_mount, tmp_path)
    lightning, hf, keras = results["lightning"], results["huggingface"], results["keras"]
    check_refused_third_save("lightning", lightning, ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"])
    # Lightning's files went through fix.save_checkpoint: its manifest names both (issue 25)
    assert MANIFEST in lightning["files"], lightning
    assert lightning["manifest"] == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt"], lightning
    check_refused_third_save("huggingface", hf, ["checkpoint-1", "checkpoint-2"])
    check_refused_third_save("keras", keras, ["w_01.weights.h5", "w_02.weights.h5"])
    # the check at train start: Lightning's CSV logs go to the share (said in a log line:
    # no notebook here); Keras watched the share while it was paused
    assert "shared-mount" in {code for code, _ in lightning["warnings"]}, lightning
    assert "trainwatch [shared-mount]" in results["stderr"]
    paused = {subject: code for code, subject in keras["warnings"]}
    assert paused.get(str(sshfs_mount.path / "keras-logs")) == "mount-unresponsive", keras
