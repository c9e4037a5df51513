"""Discovery of log/checkpoint directories by duck typing (no torch/lightning/transformers),
and the fix as code for the object found."""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from unittest import mock

from tests.support.env import need
from trainwatch_lab.notebook.discover import discover, find_on, fix_code

REPO = Path(__file__).resolve().parents[2]


class SummaryWriter:  # torch.utils.tensorboard: log_dir attribute
    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir

    def add_scalar(self, *a: object) -> None: ...


class TbxWriter:  # tensorboardX: logdir
    def __init__(self, logdir: str) -> None:
        self.logdir = logdir


class TensorBoardLogger:  # Lightning: log_dir is a property built from save_dir
    def __init__(self, save_dir: str, name: str) -> None:
        self._save_dir, self._name = save_dir, name

    @property
    def save_dir(self) -> str:
        return self._save_dir

    @property
    def log_dir(self) -> str:
        return os.path.join(self._save_dir, self._name, "version_0")


class ModelCheckpoint:
    def __init__(self, dirpath: str | None) -> None:
        self.dirpath = dirpath


class Trainer:  # Lightning Trainer: loggers + callbacks
    def __init__(self, loggers: list[object], callbacks: list[object]) -> None:
        self.loggers = loggers
        self.callbacks = callbacks


@dataclass
class TrainingArguments:  # Hugging Face: a dataclass
    output_dir: str
    logging_dir: str | None = None


class HFTrainer:
    def __init__(self, args: TrainingArguments) -> None:
        self.args = args


def paths(found: list) -> set[str]:
    return {f.path for f in found}


def test_summary_writers_torch_and_tensorboardx(tmp_path: Path) -> None:
    ns = {
        "writer": SummaryWriter(str(tmp_path / "runs" / "a")),
        "tbx": TbxWriter(str(tmp_path / "runs" / "b")),
    }
    found = discover(ns)
    assert paths(found) == {str(tmp_path / "runs" / "a"), str(tmp_path / "runs" / "b")}
    where = {f.where for f in found}
    assert {"writer.log_dir", "tbx.logdir"} <= where


def test_lightning_trainer_loggers_and_checkpoint(tmp_path: Path) -> None:
    logger = TensorBoardLogger(str(tmp_path / "lightning_logs"), "exp")
    ckpt = ModelCheckpoint(str(tmp_path / "ckpt"))
    trainer = Trainer([logger], [object(), ckpt])
    found = discover({"trainer": trainer})
    assert paths(found) == {
        str(tmp_path / "lightning_logs"),
        str(tmp_path / "lightning_logs" / "exp" / "version_0"),
        str(tmp_path / "ckpt"),
    }
    ck = next(f for f in found if f.path.endswith("ckpt"))
    assert ck.where == "trainer.callbacks[1].dirpath"
    assert ck.what == "checkpoint directory"


def test_hugging_face_arguments_and_trainer(tmp_path: Path) -> None:
    args = TrainingArguments(str(tmp_path / "out"), logging_dir=str(tmp_path / "out" / "logs"))
    assert paths(discover({"args": args})) == {str(tmp_path / "out"), str(tmp_path / "out/logs")}
    found = discover({"trainer": HFTrainer(TrainingArguments(str(tmp_path / "o2")))})
    assert paths(found) == {str(tmp_path / "o2")}  # logging_dir None is skipped
    assert found[0].where == "trainer.args.output_dir"


def test_paths_are_normalised_not_resolved(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")  # dangling on purpose: never followed
    found = discover({"w": SummaryWriter("link/./runs/../run1"), "p": ModelCheckpoint(Path("~"))})
    assert paths(found) == {str(tmp_path / "link" / "run1"), os.path.expanduser("~")}


def test_objects_that_answer_everything_are_not_asked() -> None:
    """Mocks, proxies and DataFrame-like objects would invent a log_dir: we look statically."""

    class AnswersAll:
        def __getattr__(self, name: str) -> str:
            return "/should/not/be/found"

    found = discover({"m": mock.MagicMock(), "a": AnswersAll(), "mm": mock.Mock(log_dir=None)})
    assert found == []


def test_property_that_raises_and_non_path_values_are_ignored(tmp_path: Path) -> None:
    class Broken:
        @property
        def log_dir(self) -> str:
            raise RuntimeError("not configured")

    ns = {
        "b": Broken(),
        "n": SummaryWriter(123),  # type: ignore[arg-type]
        "url": SummaryWriter("s3://bucket/runs"),
        "empty": ModelCheckpoint(""),
        "none": ModelCheckpoint(None),
        "_private": SummaryWriter(str(tmp_path / "hidden")),
        "module": os,
        "cls": SummaryWriter,
        "text": "log_dir",
    }
    assert discover(ns) == []


def test_lists_of_writers_and_restricting_names(tmp_path: Path) -> None:
    writers = [SummaryWriter(str(tmp_path / f"w{i}")) for i in range(3)]
    ns = {"writers": writers, "other": SummaryWriter(str(tmp_path / "other"))}
    assert len(discover(ns)) == 4
    assert paths(discover(ns, names=["other", "missing"])) == {str(tmp_path / "other")}
    assert find_on(writers, "writers")[2].where == "writers[2].log_dir"


def test_discovery_imports_no_training_library(tmp_path: Path) -> None:
    before = {
        m
        for m in ("torch", "lightning", "pytorch_lightning", "transformers", "tensorboardX")
        if m in sys.modules
    }
    discover({"w": SummaryWriter(str(tmp_path)), "t": Trainer([], [])})
    after = {
        m
        for m in ("torch", "lightning", "pytorch_lightning", "transformers", "tensorboardX")
        if m in sys.modules
    }
    assert after == before


# -- Keras, and what a Lightning logger must not be asked ----------------------------------
class KerasModelCheckpoint:  # keras.callbacks.ModelCheckpoint: a filepath pattern
    def __init__(self, filepath: str) -> None:
        self.filepath = filepath
        self.save_best_only = False
        self.save_freq = "epoch"


class BackupAndRestore:
    def __init__(self, backup_dir: str) -> None:
        self.backup_dir = backup_dir


class LazyVersionLogger:  # Lightning: log_dir picks a version by listing save_dir
    def __init__(self, save_dir: str) -> None:
        self._root_dir, self._version = save_dir, None

    @property
    def save_dir(self) -> str:
        return self._root_dir

    @property
    def log_dir(self) -> str:
        raise AssertionError("read log_dir: it lists save_dir, which may hang on a share")


def as_module(cls: type, module: str, name: str | None = None) -> type:
    """The same class, as if it came from ``module`` (fix_code goes by the class's module)."""
    return type(name or cls.__name__, (cls,), {"__module__": module})


def test_keras_checkpoint_pattern_and_backup_dir(tmp_path: Path) -> None:
    ns = {
        "ckpt": KerasModelCheckpoint(str(tmp_path / "ckpt" / "model_{epoch:02d}.keras")),
        "backup": BackupAndRestore(str(tmp_path / "backup")),
        "data": type("Data", (), {"filepath": str(tmp_path / "train.csv")})(),  # not a save
    }
    found = {f.where: f for f in discover(ns)}
    assert set(found) == {"ckpt.filepath", "backup.backup_dir"}
    assert found["ckpt.filepath"].path == str(tmp_path / "ckpt")
    assert found["ckpt.filepath"].what == "checkpoint directory"


def test_a_lightning_log_dir_is_not_read_before_its_version_is_known(tmp_path: Path) -> None:
    logger = as_module(LazyVersionLogger, "lightning.pytorch.loggers.tensorboard")(str(tmp_path))
    found = discover({"logger": logger})
    assert [(f.where, f.path) for f in found] == [("logger.save_dir", str(tmp_path))]
    logger._version = 3  # picked (by fit): the property is cheap now
    type(logger).log_dir = property(lambda self: os.path.join(self.save_dir, "version_3"))
    assert {f.where for f in discover({"logger": logger})} == {"logger.log_dir", "logger.save_dir"}


def test_fix_code_for_the_object_found(tmp_path: Path) -> None:
    share = "/mnt/share/runs/exp1"
    writer = as_module(TbxWriter, "tensorboardX.writer")(share)
    lightning_trainer = as_module(Trainer, "lightning.pytorch.trainer.trainer")(
        [as_module(LazyVersionLogger, "lightning.pytorch.loggers.csv_logs")("/mnt/share/pl")],
        [as_module(ModelCheckpoint, "lightning.pytorch.callbacks")("/mnt/share/ckpt")],
    )
    hf_args = as_module(TrainingArguments, "transformers.training_args")("/mnt/share/out")
    hf_trainer = as_module(HFTrainer, "transformers.trainer", "Trainer")(hf_args)
    keras_ckpt = as_module(KerasModelCheckpoint, "keras.src.callbacks", "ModelCheckpoint")(
        "/mnt/share/k/m.keras"
    )
    ns = {"writer": writer, "trainer": lightning_trainer, "args": hf_args, "cb": keras_ckpt}
    codes = {f.where: fix_code(f, "shared-mount") for f in discover(ns)}
    codes["hf.args.output_dir"] = fix_code(discover({"hf": hf_trainer})[0], "checkpoint-wont-fit")
    assert codes["writer.logdir"] == (
        "from trainwatch_lab.fix import local_mirror\n"
        'writer = TbxWriter(local_mirror("/mnt/share/runs/exp1"))'
    )
    assert (
        'logger = LazyVersionLogger(local_mirror("/mnt/share/pl"))'
        in codes["trainer.loggers[0].save_dir"]
    )
    assert codes["trainer.callbacks[0].dirpath"] == (
        "from trainwatch_lab.integrations.lightning import TrainWatchCallback\n"
        "trainer = Trainer(..., callbacks=[TrainWatchCallback(), ...])"
    )
    assert "args=args" in codes["args.output_dir"]
    assert codes["hf.args.output_dir"].endswith("hf.add_callback(TrainWatchCallback())")
    assert "callbacks=[TrainWatchCallback(cb), cb]" in codes["cb.filepath"]
    for code in codes.values():
        ast.parse(code)  # every line is Python a user can paste
    plain = discover({"w": SummaryWriter(str(tmp_path))})[0]  # a class of no known library
    assert fix_code(plain, "shared-mount") is None
    assert fix_code(discover({"writer": writer})[0], "gpu-stalled") is None


REAL_OBJECTS = textwrap.dedent(
    """
    import json, sys, time
    import keras
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint as LightningCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboardX import SummaryWriter
    from transformers import TrainingArguments
    from trainwatch_lab.notebook.discover import discover, fix_code

    share, local = sys.argv[1], sys.argv[2]
    ns = {
        "ckpt": keras.callbacks.ModelCheckpoint(local + "/keras/model_{epoch:02d}.keras"),
        "backup": keras.callbacks.BackupAndRestore(local + "/backup"),
        "args": TrainingArguments(output_dir=local + "/hf", report_to=[]),
        "trainer": L.Trainer(
            logger=TensorBoardLogger(share + "/pl_logs"),  # version not picked yet
            callbacks=[LightningCheckpoint(dirpath=share + "/pl_ckpt")],
            enable_progress_bar=False,
        ),
        "writer": SummaryWriter(local + "/tbx"),
    }
    print("ready", flush=True)
    sys.stdin.readline()  # the share is paused now
    t0 = time.perf_counter()
    found = discover(ns)
    took = time.perf_counter() - t0
    ns["writer"].close()
    print(json.dumps({"took": took, "found": [
        [f.where, f.path, f.what, fix_code(f, "shared-mount")] for f in found
    ]}), flush=True)
    """
)


def test_real_framework_objects_on_a_paused_share(sshfs_mount, tmp_path: Path) -> None:
    """Keras 3 (JAX), Hugging Face, Lightning and tensorboardX objects as they really are;
    the Lightning logger's share is paused: discovery must not list it."""
    missing = [
        m for m in ("keras", "lightning", "transformers", "tensorboardX") if not find_spec(m)
    ]
    need(not missing, f"needs {', '.join(missing)} (the test extra)")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", REAL_OBJECTS, str(sshfs_mount.path), str(tmp_path)],
        cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", line + (proc.stderr.read() if proc.stderr else "")
        sshfs_mount.pause()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "discovery hung on the paused share"
        result = json.loads(proc.stdout.readline())
    finally:
        sshfs_mount.resume()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert result["took"] < 1.0
    found = {where: (path, what, code) for where, path, what, code in result["found"]}
    share, local = str(sshfs_mount.path), str(tmp_path)
    assert found["ckpt.filepath"][:2] == (f"{local}/keras", "checkpoint directory")
    assert found["backup.backup_dir"][:2] == (f"{local}/backup", "backup directory")
    assert found["args.output_dir"][:2] == (f"{local}/hf", "output directory")
    assert found["trainer.loggers[0].save_dir"][0] == f"{share}/pl_logs"
    assert found["trainer.callbacks[1].dirpath"][0] == f"{share}/pl_ckpt"
    assert found["writer.logdir"][0] == f"{local}/tbx"
    assert not [w for w in found if w.endswith(".log_dir")]  # never asked: it would list
    assert found["writer.logdir"][2] == (
        "from trainwatch_lab.fix import local_mirror\n"
        f'writer = SummaryWriter(local_mirror("{local}/tbx"))'
    )
    assert "TrainWatchCallback(ckpt), ckpt" in found["ckpt.filepath"][2]
    assert "args=args" in found["args.output_dir"][2]
