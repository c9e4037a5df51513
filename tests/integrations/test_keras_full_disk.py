"""Issue 38 with the Keras callback: a real Keras 3 ``fit`` (JAX backend, CPU) whose
``ModelCheckpoint`` saves the whole model (~2 MiB, ``.keras``) every epoch onto a loop ext4
that holds 2.5 of them. ``on_full="wait"`` pauses the fit at the 3rd save (before
``ModelCheckpoint`` writes), a real webhook hears it, another process frees space, and the
fit finishes; every save loads back, the last one equal to the trained model. The fit is a
child process (Keras and JAX are imported there only)."""

from __future__ import annotations

import json
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.full_disk import recorded_kinds, small_disk, start_child, wait_then_free

EPOCHS = 5

FIT = textwrap.dedent(
    """
    import glob, json, logging, os, sys
    import keras
    import numpy as np
    from trainwatch_lab.integrations.keras import TrainWatchCallback

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    ckpt, options = sys.argv[1], json.loads(sys.argv[2])
    save = keras.callbacks.ModelCheckpoint(os.path.join(ckpt, "model_{epoch:02d}.keras"))
    cb = TrainWatchCallback(save, check=False, **options)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(1024)])  # 2 MiB
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(8, 512), np.random.rand(8, 1024)
    model.fit(x, y, epochs=EPOCHS, batch_size=8, callbacks=[cb, save], verbose=0)
    loaded = {}
    for path in sorted(glob.glob(os.path.join(ckpt, "*.keras"))):
        back = keras.saving.load_model(path)  # whole: loads
        loaded[os.path.basename(path)] = bool(
            all(np.array_equal(a, b) for a, b in zip(back.get_weights(), model.get_weights()))
        )
    print(json.dumps({"done": True, "loaded": loaded}), flush=True)
    """
).replace("EPOCHS", str(EPOCHS))


def names(ckpt: Path) -> list[str]:
    return sorted(p.name for p in ckpt.glob("*.keras"))


def test_wait_pauses_the_fit_before_the_save_and_resumes(loop_ext4) -> None:
    need(find_spec("keras") is not None and find_spec("jax") is not None, "needs keras and jax")
    ckpt, filler = small_disk(loop_ext4)
    t0 = time.time()
    webhook = Webhook()
    options = {"on_full": "wait", "recheck_s": 0.2, "notify": webhook.url}
    proc = start_child(FIT, ckpt, json.dumps(options))

    def while_paused(told: dict[str, Any]) -> None:
        assert "is paused" in told["message"] and told["subject"] == str(ckpt)
        assert names(ckpt) == ["model_01.keras", "model_02.keras"]

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0, err
    saved = [f"model_{e:02d}.keras" for e in range(1, EPOCHS + 1)]
    # every save loads back; only the last one holds the final weights
    assert lines[-1]["loaded"] == {n: n == saved[-1] for n in saved}, lines
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]
    assert recorded_kinds(t0, ckpt) == ["save-paused", "save-resumed"]
