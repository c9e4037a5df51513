"""Issue 38's "done when": a real plain-PyTorch training loop on a small loop-device ext4 that
would die at its 3rd save. With retention (keep=2) it lives on; with a fallback it saves
there; with neither, on_full="wait" pauses it, a webhook hears it (a real HTTP server on
127.0.0.1), another process frees space, and the loop resumes and finishes. Every
checkpoint is loaded back whole. The loop runs in a child process (torch is imported
there, never in the test process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
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

EPOCHS = 6

LOOP = textwrap.dedent(
    """
    import json, logging, os, sys
    import torch
    from trainwatch_lab.fix import save_checkpoint
    from trainwatch_lab.integrations.notify import notify_to, stop_notifying

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    ckpt, options = sys.argv[1], json.loads(sys.argv[2])
    webhook = options.pop("webhook", None)
    notifier = notify_to(webhook) if webhook else None
    torch.manual_seed(0)
    model = torch.nn.Linear(512, 1024)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(1, EPOCHS + 1):
        loss = model(torch.randn(16, 512)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        state = {"epoch": epoch, "model": model.state_dict()}
        out = save_checkpoint(lambda p: torch.save(state, p),
                              os.path.join(ckpt, f"epoch-{epoch:03d}.pt"), **options)
        back = torch.load(out)
        assert back["epoch"] == epoch and torch.equal(back["model"]["weight"], model.weight)
        print(json.dumps({"epoch": epoch, "saved": out}), flush=True)
    if notifier is not None:
        stop_notifying(notifier)  # what is queued goes out before the script ends
    print(json.dumps({"done": True}), flush=True)
    """
).replace("EPOCHS", str(EPOCHS))


def start(ckpt: Path, **options: Any) -> subprocess.Popen[str]:
    return start_child(LOOP, ckpt, json.dumps(options))


def need_torch() -> None:
    from importlib.util import find_spec

    need(find_spec("torch") is not None, "needs torch")


def epochs_in(*paths: Path) -> dict[str, int]:
    """Each checkpoint loaded back in a child (torch), its epoch."""
    files = sorted(str(p) for p in paths)
    proc = subprocess.run([sys.executable, "-c", CHECK, *files], env=child_env(),
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(proc.stdout)


def saves(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith("epoch-"))


def test_without_help_the_loop_dies_at_its_3rd_save(loop_ext4) -> None:
    """The baseline the others improve on (and what the default still does)."""
    need_torch()
    ckpt, _ = small_disk(loop_ext4)
    lines, err = finish(proc := start(ckpt))
    assert proc.returncode != 0 and "CheckpointWontFit" in err, err
    assert [ln["epoch"] for ln in lines] == [1, 2]
    assert epochs_in(*saves(ckpt)) == {str(ckpt / f"epoch-00{e}.pt"): e for e in (1, 2)}


def test_with_retention_the_loop_lives_on(loop_ext4) -> None:
    need_torch()
    ckpt, filler = small_disk(loop_ext4)
    lines, err = finish(proc := start(ckpt, keep=2))
    assert proc.returncode == 0, err
    assert lines[-1] == {"done": True} and len(lines) == EPOCHS + 1
    assert "older save(s)" in err and "first to make room" in err
    kept = saves(ckpt)
    assert [p.name for p in kept] == ["epoch-005.pt", "epoch-006.pt"] and filler.exists()
    assert epochs_in(*kept) == {str(kept[0]): 5, str(kept[1]): 6}


def test_with_a_fallback_the_loop_saves_there(loop_ext4, tmpfs_mount) -> None:
    need_torch()
    ckpt, _ = small_disk(loop_ext4)
    scratch = tmpfs_mount("32m").path / "ckpt"
    lines, err = finish(proc := start(ckpt, fallback=str(scratch)))
    assert proc.returncode == 0, err
    where = {ln["epoch"]: ln["saved"] for ln in lines if "epoch" in ln}
    assert where == {
        **{e: str(ckpt / f"epoch-00{e}.pt") for e in (1, 2)},
        **{e: str(scratch / f"epoch-00{e}.pt") for e in (3, 4, 5, 6)},
    }
    assert f"instead of {ckpt}" in err
    found = epochs_in(*saves(ckpt), *saves(scratch))
    assert found == {path: epoch for epoch, path in where.items()}


def test_with_neither_it_pauses_notifies_and_resumes_when_space_is_freed(loop_ext4) -> None:
    need_torch()
    ckpt, filler = small_disk(loop_ext4)
    t0 = time.time()
    webhook = Webhook()
    proc = start(ckpt, on_full="wait", recheck_s=0.2, webhook=webhook.url)

    def while_paused(told: dict[str, Any]) -> None:
        assert "epoch-003.pt is paused" in told["message"] and told["subject"] == str(ckpt)
        assert len(saves(ckpt)) == 2

    lines, err = wait_then_free(proc, webhook, filler, while_paused)
    assert proc.returncode == 0, err
    assert lines[-1] == {"done": True}
    assert "is paused" in err and "resumed after" in err
    resumed = webhook.bodies()[1]  # sent before the loop ended (stop_notifying flushes)
    assert resumed["state"] == "cleared" and resumed["code"] == "checkpoint-wont-fit"
    assert epochs_in(*saves(ckpt)) == {str(ckpt / f"epoch-00{e}.pt"): e for e in range(1, 7)}
    assert recorded_kinds(t0, ckpt) == ["save-paused", "save-resumed"]
