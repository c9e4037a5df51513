"""Randomized crash test (issue 25): a real process saves checkpoints (a file, a directory, a
kept series) and mirrors a directory (a rewritten file, an appended log), round after round,
and is SIGKILLed with its guard helpers at a random moment after its first round finished
(so inside a later round: mid-save or mid-sync, never during imports). After every kill each final
name holds an old or a new content, whole; a directory checkpoint is there or recoverable;
nothing but the saver's and the mirror's own files changed; and a last clean run leaves no
leftover at all. About a minute; the seed is printed, and ``TRAINWATCH_CRASH_SEED`` replays
one."""

from __future__ import annotations

import contextlib
import os
import random
import re
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 45.0  # rounds start until then ...
MIN_ROUNDS = 12  # ... and at least this many
KILL_ROUNDS = 3.0  # the random moment: up to this many first-round lengths after it ended
FIRST_ROUND_S = 120.0  # a child that has not finished its first round by then fails the test
SIZE = 20_000

CHILD = textwrap.dedent(
    f"""
    import os, sys, time
    from trainwatch_lab.fix import save_checkpoint
    from trainwatch_lab.fix.mirror.mirror import Mirror

    root, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ck, local, share = (os.path.join(root, n) for n in ("ckpt", "local", "share"))

    def content(v):
        return (b"%08d" % v) * ({SIZE} // 8)

    def write(v):
        def save(path):
            with open(path, "wb") as fh:
                fh.write(content(v))
        return save

    def write_dir(v):
        def save(path):
            os.mkdir(path)
            for part in ("weights", "optimizer"):
                write(v)(os.path.join(path, part))
        return save

    m = Mirror(local, share, every=60)
    for v in range(first, last):
        started = time.monotonic()
        print("saving", v, flush=True)
        save_checkpoint(write(v), os.path.join(ck, "model.pt"))
        save_checkpoint(write_dir(v), os.path.join(ck, "best"))
        save_checkpoint(write(v), os.path.join(ck, f"ep-{{v}}.pt"), keep=2)
        with open(os.path.join(local, "state.json"), "wb") as fh:
            fh.write(content(v))
        with open(os.path.join(local, "log.txt"), "ab") as fh:
            fh.write(b"%08d\\n" % v)
        print("syncing", v, flush=True)
        assert m.sync(30)
        print("done", v, time.monotonic() - started, flush=True)
    assert m.close(30)
    """
)


def whole(path: Path) -> int:
    """The version a file holds whole; raises AssertionError for anything else."""
    data = path.read_bytes()
    assert len(data) == SIZE and data == data[:8] * (SIZE // 8), f"{path}: not whole"
    return int(data[:8])


def kill_tree(pid: int) -> None:
    """SIGKILL the child and every process under it (its guard helpers) at once."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs[1:], timeout=30)  # the child itself: reaped by Popen


SAVER_OWN = re.compile(r"\.tw-partial-.*|\.trainwatch-saves\.json")
MIRROR_OWN = re.compile(r"\.twmirror-[0-9a-f]{16}\.tmp|\.trainwatch-mirror-share\.lock")


def check(root: Path, done: int | None, why: str) -> None:
    """The invariants after a kill; ``done`` the last version the child finished."""
    ck, share, local = root / "ckpt", root / "share", root / "local"
    assert (ck / "ep-1.pt").read_bytes() == b"the user's", why
    assert (ck / "notes.txt").read_bytes() == b"mine", why
    assert (share / "user.txt").read_bytes() == b"on the share", why
    fixed = {"model.pt", "best", "notes.txt"}
    for name in os.listdir(ck):
        ok = name in fixed or re.fullmatch(r"ep-\d+\.pt", name) or SAVER_OWN.fullmatch(name)
        assert ok, f"{why}: {name} in the checkpoint directory"
    if done is not None or (ck / "model.pt").exists():
        whole(ck / "model.pt")
    best = ck / "best"
    if not best.exists():  # only between the two renames of a filesystem that cannot swap
        aside = list(ck.glob(".tw-partial-*/.tw-previous/best"))
        assert aside or done is None, f"{why}: best vanished"
    else:
        versions = {whole(best / "weights"), whole(best / "optimizer")}
        assert len(versions) == 1 and sorted(os.listdir(best)) == ["optimizer", "weights"], why
    for p in ck.glob("ep-*.pt"):
        assert p.name == "ep-1.pt" or whole(p) == int(p.name[3:-3]), why
    for name in os.listdir(share):
        ok = name in {"state.json", "log.txt", "user.txt"} or MIRROR_OWN.fullmatch(name)
        assert ok, f"{why}: {name} on the share"
    if (share / "state.json").exists():
        whole(share / "state.json")
    if (share / "log.txt").exists():
        copied = (share / "log.txt").read_bytes()
        assert (local / "log.txt").read_bytes().startswith(copied), f"{why}: log torn"


def first_round(proc: subprocess.Popen[str]) -> tuple[float, str]:
    """Wait for the child's first finished round (its imports and first saves take a while
    on a loaded machine): how long that round took, by the child's clock, and what it
    printed after that line. Read straight from the pipe (no buffer that ``communicate``
    would not see)."""
    assert proc.stdout is not None
    fd, seen = proc.stdout.fileno(), b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + FIRST_ROUND_S
        while time.monotonic() < deadline and sel.select(deadline - time.monotonic()):
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the child ended: the assertion below says how
            seen += chunk
            if (m := re.search(rb"^done \d+ (\S+)\n", seen, re.M)) is not None:
                return float(m.group(1)), seen[m.end() :].decode()
    raise AssertionError(f"the child finished no round in {FIRST_ROUND_S:.0f} s: {seen!r}")


def phase(lines: list[str]) -> str:
    """What the child was doing when it was killed: its last line says (none after the
    first round's: it had just finished a round)."""
    words = [line.split() for line in lines if line.strip()]
    last = words[-1][0] if words else "done"
    return {"saving": "mid-save", "syncing": "mid-sync"}.get(last, "between")


@pytest.mark.slow  # a minute of random SIGKILLs
def test_random_kills_never_leave_a_torn_or_missing_file(tmp_path: Path) -> None:
    seed = int(os.environ.get("TRAINWATCH_CRASH_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    print(f"crash test seed {seed} (TRAINWATCH_CRASH_SEED={seed} replays it)")
    for d in ("ckpt", "local", "share"):
        (tmp_path / d).mkdir()
    (tmp_path / "ckpt" / "ep-1.pt").write_bytes(b"the user's")
    (tmp_path / "ckpt" / "notes.txt").write_bytes(b"mine")
    (tmp_path / "share" / "user.txt").write_bytes(b"on the share")
    deadline = time.monotonic() + BUDGET_S
    done: int | None = None
    rounds = 0
    landed: dict[str, int] = {}
    while rounds < MIN_ROUNDS or time.monotonic() < deadline:
        first = 10 + 1_000_000 * rounds  # the child saves until it is killed
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(first), str(first + 999_999)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            round_s, printed = first_round(proc)
            after = rng.uniform(0.0, KILL_ROUNDS * round_s)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(after)  # the random kill point (the child never ends before it)
        finally:
            kill_tree(proc.pid)
        out, err = proc.communicate(timeout=30)
        why = f"seed {seed}, run {rounds}, killed {after:.2f} s after its first round"
        assert proc.returncode == -signal.SIGKILL, f"{why}: {out[-300:]} {err}"
        lines = (printed + out).splitlines()
        landed[phase(lines)] = landed.get(phase(lines), 0) + 1
        done = max([first, *(int(ln.split()[1]) for ln in lines if ln.startswith("done "))])
        check(tmp_path, done, why)
        rounds += 1
    # every kill came after a finished round, inside a later one (the child never idles)
    inside = landed.get("mid-save", 0) + landed.get("mid-sync", 0)
    assert inside >= MIN_ROUNDS, f"seed {seed}: only {inside} kills inside a round: {landed}"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), "5", "7"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    check(tmp_path, 6, f"seed {seed}, the clean run")
    left = [n for n in os.listdir(tmp_path / "ckpt") if n.startswith(".tw-partial-")]
    left += [n for n in os.listdir(tmp_path / "share") if n.startswith(".twmirror-")]
    assert not left, f"seed {seed}: leftovers after a clean run: {left}"
    assert whole(tmp_path / "ckpt" / "model.pt") == 6
    assert whole(tmp_path / "share" / "state.json") == 6
    assert (tmp_path / "share" / "log.txt").read_bytes() == (
        tmp_path / "local" / "log.txt"
    ).read_bytes()
    print(f"crash test: {rounds} runs killed at random ({landed}), seed {seed}")
