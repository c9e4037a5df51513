"""Discovery of log/checkpoint directories by duck typing (no torch/lightning/transformers)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from trainwatch_lab.notebook.discover import discover, find_on


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
