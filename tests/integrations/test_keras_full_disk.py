"""Issue 38 with the Keras callback: a real Keras 3 ``fit`` (JAX backend, CPU) whose
``ModelCheckpoint`` saves the whole model (~2 MiB, ``.keras``) every epoch onto a loop ext4
that holds 2.5 of them. ``keep=2`` removes its own oldest saves first (never a file that was
there before the fit); ``fallback=`` points the saves that do not fit to a tmpfs;
``on_full="wait"`` pauses the fit at the 3rd save (before ``ModelCheckpoint`` writes), a real
webhook hears it, another process frees space, and the fit finishes. Every save loads back,
the last one equal to the trained model. The fit is a child process (Keras and JAX are
imported there only)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tests.advice.test_notify import Webhook
from tests.support.env import need
from tests.support.full_disk import (
    finish,
    recorded_kinds,
    small_disk,
    start_child,
    wait_then_free,
)

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
    cb = TrainWatchCallback(save, **options)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(1024)])  # 2 MiB
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(8, 512), np.random.rand(8, 1024)
    model.fit(x, y, epochs=EPOCHS, batch_size=8, callbacks=[cb, save], verbose=0)
    loaded = {}
    for d in filter(None, (ckpt, options.get("fallback"))):
        for path in sorted(glob.glob(os.path.join(d, "model_0[1-9].keras"))):
            back = keras.saving.load_model(path)  # whole: loads
            same = zip(back.get_weights(), model.get_weights())
            loaded[path] = bool(all(np.array_equal(a, b) for a, b in same))
    print(json.dumps({"done": True, "loaded": loaded}), flush=True)
    """
).replace("EPOCHS", str(EPOCHS))


# A fit that ends in an exception after a save went to the fallback: Keras calls no callback
# then, so the ModelCheckpoint stayed pointed at the fallback and the next fit (its own
# directory free again) saved there and called the fallback its home.
FIT_AFTER_ERROR = textwrap.dedent(
    """
    import glob, json, logging, os, sys
    import keras
    import numpy as np
    from trainwatch_lab.integrations.keras import TrainWatchCallback

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    ckpt, filler, fallback = sys.argv[1:4]
    save = keras.callbacks.ModelCheckpoint(os.path.join(ckpt, "model_{epoch:02d}.keras"))
    cb = TrainWatchCallback(save, check=False, fallback=fallback)

    class Boom(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 2:  # after the 3rd save, the first one on the fallback
                raise RuntimeError("boom")

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(1024)])  # 2 MiB
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(8, 512), np.random.rand(8, 1024)
    try:
        model.fit(x, y, epochs=5, batch_size=8, callbacks=[cb, save, Boom()], verbose=0)
    except RuntimeError:
        pass
    print(json.dumps({"after_error": save.filepath}), flush=True)
    os.unlink(filler)  # room at home again
    for name in glob.glob(os.path.join(ckpt, "*.keras")):
        os.unlink(name)
    model.fit(x, y, epochs=1, batch_size=8, callbacks=[cb, save], verbose=0)
    print(json.dumps({"second_fit": save.filepath}), flush=True)
    """
)


def need_keras() -> None:
    need(find_spec("keras") is not None and find_spec("jax") is not None, "needs keras and jax")


def fit(ckpt: Path, **options: Any) -> subprocess.Popen[str]:
    return start_child(FIT, ckpt, json.dumps({"check": False, **options}))


def loaded(where: dict[int, Path]) -> dict[str, bool]:
    """What the child loads back: every save, only the last one the final weights."""
    last = max(where)
    return {str(d / f"model_{e:02d}.keras"): e == last for e, d in where.items()}


def names(ckpt: Path) -> list[str]:
    return sorted(p.name for p in ckpt.glob("*.keras"))


def test_keep_removes_its_own_oldest_saves_and_the_fit_lives_on(loop_ext4) -> None:
    need_keras()
    ckpt, filler = small_disk(loop_ext4)
    theirs = ckpt / "model_00.keras"  # matches the pattern, but was there before the fit
    theirs.write_bytes(b"another program's file")
    t0 = time.time()
    lines, err = finish(proc := fit(ckpt, keep=2))
    assert proc.returncode == 0, err
    assert names(ckpt) == ["model_00.keras", "model_04.keras", "model_05.keras"]
    assert theirs.read_bytes() == b"another program's file" and filler.exists()
    assert lines[-1]["loaded"] == loaded({4: ckpt, 5: ckpt})
    assert "first to make room" in err
    assert recorded_kinds(t0, ckpt) == ["save-room-made"] * 3


def test_fallback_points_the_saves_that_do_not_fit_elsewhere(loop_ext4, tmpfs_mount) -> None:
    need_keras()
    ckpt, _ = small_disk(loop_ext4)
    scratch = tmpfs_mount("32m").path / "ckpt"
    t0 = time.time()
    lines, err = finish(proc := fit(ckpt, fallback=str(scratch)))
    assert proc.returncode == 0, err
    assert names(ckpt) == ["model_01.keras", "model_02.keras"]
    assert names(scratch) == ["model_03.keras", "model_04.keras", "model_05.keras"]
    assert f"instead of {ckpt}" in err
    assert lines[-1]["loaded"] == loaded({1: ckpt, 2: ckpt, 3: scratch, 4: scratch, 5: scratch})
    assert recorded_kinds(t0, ckpt) == ["save-redirected"] * 3


def test_wait_pauses_the_fit_before_the_save_and_resumes(loop_ext4) -> None:
    need_keras()
    ckpt, filler = small_disk(loop_ext4)
    t0 = time.time()
    webhook = Webhook()
    proc = fit(ckpt, on_full="wait", recheck_s=0.2, notify=webhook.url)

    def while_paused(told: dict[str, Any]) -> None:
        assert "is paused" in told["message"] and told["subject"] == str(ckpt)
        assert names(ckpt) == ["model_01.keras", "model_02.keras"]

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0, err
    assert lines[-1]["loaded"] == loaded({e: ckpt for e in range(1, EPOCHS + 1)})
    assert [b["state"] for b in webhook.bodies()] == ["started", "cleared"]
    assert recorded_kinds(t0, ckpt) == ["save-paused", "save-resumed"]


def test_a_fit_that_raised_saves_at_home_again_in_the_next_fit(loop_ext4, tmpfs_mount) -> None:
    need_keras()
    ckpt, filler = small_disk(loop_ext4)
    scratch = tmpfs_mount("32m").path / "ckpt"
    lines, err = finish(proc := start_child(FIT_AFTER_ERROR, ckpt, filler, scratch))
    assert proc.returncode == 0, err
    assert lines[0]["after_error"] == str(scratch / "model_{epoch:02d}.keras")  # as Keras left it
    assert names(scratch) == ["model_03.keras"]  # only what went there before the exception
    assert names(ckpt) == ["model_01.keras"]  # the next fit saved at home
    assert lines[1]["second_fit"] == str(ckpt / "model_{epoch:02d}.keras")
