"""Tiny training setups in the real frameworks, for tests that run them in a child process
(tests/core/storage/test_checkpoint_layouts.py, tests/integrations/test_callbacks.py): the child's
environment, a Lightning module, a Hugging Face dataset, Trainer arguments and callbacks that
space the saves apart, a Keras callback doing the same.

Every framework is imported inside the function that needs it: the test process imports
this module without loading torch, JAX or Keras."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",  # a model built from a config: nothing is downloaded
    "TRANSFORMERS_OFFLINE": "1",
    "KERAS_BACKEND": "jax",
    "JAX_PLATFORMS": "cpu",
    "CUDA_VISIBLE_DEVICES": "",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore",
}


def child_env() -> dict[str, str]:
    """The child's environment: CPU only, offline, quiet, with this checkout importable."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, **CHILD_ENV, "PYTHONPATH": path}


def lightning_module(inputs: int, outputs: int, gap_s: float) -> Any:
    """One linear layer (``inputs x outputs`` weights), plain SGD (no optimizer state), a
    pause of ``gap_s`` in every training step."""
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(inputs, outputs)

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            time.sleep(gap_s)
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny()


def token_dataset(length: int, vocab: int) -> Any:
    """``length`` random 8-token sequences, labels = inputs (a causal LM's batch)."""
    import torch

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return length

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.randint(0, vocab, (8,))
            return {"input_ids": ids, "labels": ids}

    return Tokens()


def tiny_gpt2(n_embd: int, vocab: int) -> Any:
    """A one-layer GPT-2 built from its config (no download)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=1, n_head=2, n_embd=n_embd, vocab_size=vocab, n_positions=16)
    return GPT2LMHeadModel(config)


def trainer_args(output_dir: Path, save_steps: int, max_steps: int) -> Any:
    """The Trainer on CPU, batches of 2, no reporting or logging, a save every
    ``save_steps`` steps into ``output_dir/checkpoint-N/``."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(output_dir),
        save_steps=save_steps,
        max_steps=max_steps,
        per_device_train_batch_size=2,
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
    )


def trainer_spacer(gap_s: float) -> Any:
    """A Trainer callback pausing ``gap_s`` after every step."""
    from transformers import TrainerCallback

    class Spaced(TrainerCallback):
        def on_step_end(self, *args: object, **kwargs: object) -> None:
            time.sleep(gap_s)

    return Spaced()


def keras_spacer(gap_s: float) -> Any:
    """A Keras callback pausing ``gap_s`` after every epoch."""
    import keras

    class Spaced(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: object = None) -> None:
            time.sleep(gap_s)

    return Spaced()
