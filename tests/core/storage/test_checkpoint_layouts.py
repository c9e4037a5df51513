"""What one checkpoint save is, as each framework really writes it (issue 10, item 2).

``checkpoint-wont-fit`` compares the size of the newest save with the space left: the next
save will need about that much again. So one save must be one save: a Lightning
``checkpoints/`` folder of six 9 MiB files is six saves of 9 MiB, not one of 54 MiB.

Each layout is written by the library itself (Lightning, the Hugging Face Trainer,
Accelerate, torch.distributed.checkpoint, Keras 3 on JAX, Orbax), all in one child process:
torch and JAX (their threads, their start-up time) never enter the test process, and this
module is collected without importing any of them. DeepSpeed needs CUDA to build, so its
layout is copied from its code. Every test sizes the expected save from the disk itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

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
from trainwatch_lab.core.model import CheckpointInfo
from trainwatch_lab.core.storage.space import scan_checkpoints

MIB = 1024 * 1024
WRITE_TIMEOUT_S = 280  # all six libraries, imports included, take ~40 s on two cores
GAP_S = 0.05  # between saves: distinct modification times even on a coarse clock
# layout -> the modules its writer imports (installed by the `test` extra of pyproject.toml)
LIBRARIES: dict[str, tuple[str, ...]] = {
    "lightning": ("torch", "lightning"),
    "transformers": ("torch", "transformers", "safetensors"),
    "accelerate": ("torch", "accelerate", "safetensors"),
    "dcp": ("torch",),
    "keras": ("jax", "keras", "h5py"),
    "orbax": ("jax", "orbax.checkpoint"),
}


# -- the writers: run in the child process ------------------------------------------------
def write_lightning(root: Path) -> None:
    """Lightning's default layout, six saves of ~9 MiB (a 1536x1536 layer, plain SGD: no
    optimizer state) and ``last.ckpt``, with the run directory three levels down."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    data = torch.utils.data.TensorDataset(torch.randn(6, 1536))
    every_step = ModelCheckpoint(every_n_train_steps=1, save_top_k=-1, save_last=True)
    trainer = L.Trainer(
        default_root_dir=root / "proj" / "exp" / "run",
        max_steps=6,
        accelerator="cpu",
        devices=1,
        callbacks=[every_step],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = lightning_module(1536, 1536, GAP_S)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=1))


def write_transformers(root: Path) -> None:
    """The Trainer saving every 2 of 6 steps: trainer_output/checkpoint-{2,4,6}/."""
    from transformers import Trainer

    args = trainer_args(root / "trainer_output", save_steps=2, max_steps=6)
    Trainer(
        model=tiny_gpt2(n_embd=32, vocab=64),
        args=args,
        train_dataset=token_dataset(12, vocab=64),
        callbacks=[trainer_spacer(GAP_S)],
    ).train()


def write_accelerate(root: Path) -> None:
    """``save_state()`` three times with automatic naming: checkpoints/checkpoint_{0,1,2}/."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    config = ProjectConfiguration(project_dir=str(root), automatic_checkpoint_naming=True)
    accelerator = Accelerator(cpu=True, project_config=config)
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.Adam(model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    for _ in range(3):
        model(torch.randn(4, 64)).sum().backward()
        optimizer.step()
        accelerator.save_state()
        time.sleep(GAP_S)


def write_dcp(root: Path) -> None:
    """torch.distributed.checkpoint.save, one process, three steps: step_{100,200,300}/."""
    import torch
    import torch.distributed.checkpoint as dcp

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    for step in (100, 200, 300):
        dcp.save({"model": model.state_dict()}, checkpoint_id=str(root / f"step_{step}"))
        time.sleep(GAP_S)


def write_keras(root: Path) -> None:
    """Keras 3 ModelCheckpoint for three epochs: whole models (.keras) in models/, weights
    (.weights.h5) in weights/."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32), keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss="mse")
    callbacks = [
        keras.callbacks.ModelCheckpoint(str(root / "models" / "epoch_{epoch:02d}.keras")),
        keras.callbacks.ModelCheckpoint(
            str(root / "weights" / "epoch_{epoch:02d}.weights.h5"), save_weights_only=True
        ),
        keras_spacer(GAP_S),
    ]
    x, y = np.random.rand(16, 8), np.random.rand(16, 4)
    model.fit(x, y, epochs=3, batch_size=8, callbacks=callbacks, verbose=0)


def write_orbax(root: Path) -> None:
    """An Orbax CheckpointManager saving steps 0, 100 and 200: ckpt/{0,100,200}/."""
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(max_to_keep=None)
    with ocp.CheckpointManager(root / "ckpt", options=options) as manager:
        for step in (0, 100, 200):
            tree = {"w": jnp.arange(16384, dtype=jnp.float32) * (step + 1), "b": jnp.ones(64)}
            manager.save(step, args=ocp.args.StandardSave(tree))
            manager.wait_until_finished()
            time.sleep(GAP_S)


WRITERS = {
    "lightning": write_lightning,
    "transformers": write_transformers,
    "accelerate": write_accelerate,
    "dcp": write_dcp,
    "keras": write_keras,
    "orbax": write_orbax,
}


def write_all(out: str) -> None:
    """The child's entry point: each layout in out/<name>, and out/status.json saying for
    each "ok", "missing: <module>" or the writer's traceback."""
    status: dict[str, str] = {}
    for name, modules in LIBRARIES.items():
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            status[name] = f"missing: {', '.join(missing)}"
            continue
        try:
            WRITERS[name](Path(out) / name)
            status[name] = "ok"
        except Exception:
            status[name] = traceback.format_exc()
    (Path(out) / "status.json").write_text(json.dumps(status))


# -- the tests ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("layouts")
    code = f"import sys; from {__name__} import write_all; write_all(sys.argv[1])"
    child = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WRITE_TIMEOUT_S,
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    return out


def layout(written: Path, name: str) -> Path:
    status = json.loads((written / "status.json").read_text())[name]
    if status.startswith("missing:"):
        need(False, f"{name} layout needs {status[9:]} (pip install -e '.[test]')")
    assert status == "ok", f"the {name} writer failed:\n{status}"
    return written / name


def disk_size(save: Path) -> int:
    """One save's bytes on disk: the file, or every regular file under the directory."""
    if save.is_file():
        return save.stat().st_size
    return sum(p.stat().st_size for p in save.rglob("*") if p.is_file() and not p.is_symlink())


def scan(watched: Path) -> CheckpointInfo:
    info = scan_checkpoints(str(watched))
    assert info is not None, f"no checkpoint found under {watched}"
    return info


def assert_saves(watched: Path, count: int, newest: Path) -> CheckpointInfo:
    info = scan(watched)
    assert (info.count, info.newest_path) == (count, str(newest)), watched
    assert info.newest_bytes == disk_size(newest), watched
    return info


def test_lightning_six_9mib_saves_watched_at_the_run_directory(written: Path) -> None:
    run = layout(written, "lightning") / "proj" / "exp" / "run"
    checkpoints = run / "lightning_logs" / "version_0" / "checkpoints"
    saves = sorted(checkpoints.glob("epoch=*.ckpt"), key=lambda p: int(p.stem.split("=")[-1]))
    assert [p.name for p in saves][-1] == "epoch=0-step=6.ckpt" and len(saves) == 6
    last = checkpoints / "last.ckpt"
    assert last.is_file() and not last.is_symlink()  # Lightning's copy of the newest save
    for watched in (run, run.parent.parent, checkpoints.parent, checkpoints):
        info = assert_saves(watched, 6, saves[-1])
        assert info.newest_bytes == pytest.approx(9 * MIB, rel=0.01)  # not 6 x 9 MiB
        assert info.newest_mtime == pytest.approx(saves[-1].stat().st_mtime)


def test_hugging_face_trainer_checkpoint_directories(written: Path) -> None:
    out = layout(written, "transformers") / "trainer_output"
    saves = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert [p.name for p in saves] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    parts = {p.name for p in saves[-1].iterdir()}
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"} <= parts
    assert any(name.startswith("rng_state") for name in parts)
    for watched in (out, out.parent):
        assert_saves(watched, 3, saves[-1])


def test_accelerate_save_state_with_automatic_naming(written: Path) -> None:
    run = layout(written, "accelerate")
    saves = [run / "checkpoints" / f"checkpoint_{i}" for i in range(3)]
    assert all(s.is_dir() for s in saves)
    assert any(p.name.startswith("random_states_") for p in saves[-1].iterdir())
    for watched in (run, run / "checkpoints"):
        assert_saves(watched, 3, saves[-1])


def test_torch_distributed_checkpoint_directories(written: Path) -> None:
    root = layout(written, "dcp")
    newest = root / "step_300"
    names = {p.name for p in newest.iterdir()}
    assert ".metadata" in names and any(n.endswith(".distcp") for n in names)
    assert_saves(root, 3, newest)
    assert_saves(newest, 1, newest)  # the save directory watched itself


def test_keras_model_checkpoint_files(written: Path) -> None:
    root = layout(written, "keras")
    assert_saves(root / "models", 3, root / "models" / "epoch_03.keras")
    assert_saves(root / "weights", 3, root / "weights" / "epoch_03.weights.h5")
    assert scan(root).count == 6


def test_orbax_checkpoint_manager_steps(written: Path, tmp_path: Path) -> None:
    ckpt = shutil.copytree(layout(written, "orbax") / "ckpt", tmp_path / "run" / "ckpt")
    newest = ckpt / "200"
    assert (newest / "_CHECKPOINT_METADATA").is_file()
    assert_saves(ckpt, 3, newest)
    # a step still being written (Orbax's temporary name, renamed when complete) is no save
    shutil.copytree(newest, ckpt / "300.orbax-checkpoint-tmp-1796039696")
    assert_saves(ckpt.parent, 3, newest)


# DeepSpeed builds CUDA ops at install, so this copies the layout DeepSpeedEngine writes
# (deepspeed/runtime/engine.py: save_checkpoint's default tag f"global_step{global_steps}";
# _get_ckpt_name -> <save_dir>/<tag>/mp_rank_00_model_states.pt; _get_rank_zero_ckpt_name ->
# <tag>/zero_pp_rank_<dp>_mp_rank_00_optim_states.pt; _copy_recovery_script -> zero_to_fp32.py
# in <save_dir>; then the tag written to <save_dir>/latest once the save is complete; see also
# https://www.deepspeed.ai/getting-started/#model-checkpointing).
def write_deepspeed_save(save_dir: Path, step: int, mtime: float, ranks: int = 2) -> Path:
    tag = save_dir / f"global_step{step}"
    files = {"mp_rank_00_model_states.pt": 3000}
    files |= {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt": 5000 for r in range(ranks)}
    for name, size in files.items():
        make(tag / name, size, mtime)
    return tag


def make(path: Path, size: int, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    os.utime(path, (mtime, mtime))
    return path


BASE = 1_700_000_000.0


def test_deepspeed_global_step_directories_and_latest(tmp_path: Path) -> None:
    save_dir = tmp_path / "run" / "checkpoints"
    tags = [write_deepspeed_save(save_dir, s, BASE + s) for s in (100, 200)]
    make(save_dir / "zero_to_fp32.py", 700, BASE)
    (save_dir / "latest").write_text("global_step200")
    info = assert_saves(tmp_path, 2, tags[-1])
    assert info.newest_bytes == 13000 and info.newest_mtime == BASE + 200
    # global_step300 is being written: newer files, but `latest` still names the last
    # complete save, which is the size to expect of the next one
    write_deepspeed_save(save_dir, 300, BASE + 300, ranks=1)
    assert_saves(save_dir, 3, tags[-1])
    (save_dir / "latest").write_text("global_step300\n")
    assert_saves(save_dir, 3, save_dir / "global_step300")


def test_folders_of_saves_nested_in_the_watched_directory(tmp_path: Path) -> None:
    """A plain folder of checkpoint files is that many saves; the parts of one save written
    side by side (model + optimizer) are one; our own hidden probe file is nothing."""
    weights = tmp_path / "weights"
    for i in (1, 2, 3):
        make(weights / f"model_{i}.pt", 1000, BASE + 600 * i)
    make(weights / ".trainwatch-probe-1-abc.tmp", 4096, BASE + 9999)
    assert_saves(tmp_path, 3, weights / "model_3.pt")
    final = tmp_path / "final"
    make(final / "model.safetensors", 4000, BASE + 5000)
    make(final / "optimizer.pt", 8000, BASE + 5001)
    info = assert_saves(tmp_path, 4, final)
    assert info.newest_bytes == 12000


def test_lightning_last_ckpt_alone_is_a_save(tmp_path: Path) -> None:
    make(tmp_path / "checkpoints" / "last.ckpt", 900, BASE)
    assert_saves(tmp_path, 1, tmp_path / "checkpoints" / "last.ckpt")


def test_step_directories_of_a_training_loop(tmp_path: Path) -> None:
    """``step_1000/{model,optim}.pt`` written by a hand-made loop: one save per directory."""
    for step in (1000, 2000):
        make(tmp_path / "ckpts" / f"step_{step}" / "model.pt", 3000, BASE + step)
        make(tmp_path / "ckpts" / f"step_{step}" / "optim.pt", 6000, BASE + step + 1)
    info = assert_saves(tmp_path, 2, tmp_path / "ckpts" / "step_2000")
    assert info.newest_bytes == 9000
    # ... but a numbered job folder (Hydra's multirun/0/) of numbered saves holds several
    for epoch in (1, 2, 3):
        make(tmp_path / "multirun" / "0" / f"epoch_{epoch}.pt", 500, BASE + 9000 + epoch)
    assert_saves(tmp_path / "multirun", 3, tmp_path / "multirun" / "0" / "epoch_3.pt")


def test_depth_is_bounded_and_mount_points_are_not_entered(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*"abcdef")  # six levels below the watched directory
    make(deep / "model_1.pt", 10, BASE)
    assert scan_checkpoints(str(tmp_path)) is None
    assert scan_checkpoints(str(tmp_path / "a")) is not None
    mount = tmp_path / "a" / "b" / "c"
    assert scan_checkpoints(str(tmp_path / "a"), skip_dirs=frozenset({str(mount)})) is None


def test_a_big_folder_beside_the_saves_does_not_use_up_the_scan(tmp_path: Path) -> None:
    """Folders whose names say nothing of training output are listed only so far, and data
    sets are not entered: the saves beside them are still found within ``max_entries``."""
    for i in range(1200):
        (tmp_path / "frames").mkdir(exist_ok=True)
        (tmp_path / "frames" / f"{i:05d}.png").touch()
    make(tmp_path / "data" / "train.bin", 5000, BASE + 9000)  # nanoGPT's tokens, no save
    make(tmp_path / "myrun" / "checkpoint-10" / "model.safetensors", 100, BASE)
    info = scan_checkpoints(str(tmp_path), max_entries=1100)
    assert info is not None and info.newest_path == str(tmp_path / "myrun" / "checkpoint-10")
    assert info.count == 1
