"""``trainwatch-lab watch`` in a terminal reads the Jupyter server's sampler of the same user
and runtime directory (issue 33): a real ``jupyter lab``, the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.lab import jupyter_lab
from tests.support.mounts import wait_until

REPO = Path(__file__).resolve().parents[1]


def watch(runtime: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "trainwatch_lab", "watch", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_watch_reads_the_servers_sampler_and_says_so(tmp_path: Path) -> None:
    root, logs = tmp_path / "root", tmp_path / "logs"
    root.mkdir()
    logs.mkdir()
    with jupyter_lab(root) as lab:
        runtime = lab.log_path.parent / "runtime"
        proc = watch(runtime, "--duration", "60", str(logs))
        try:
            role = f"attached:{proc.pid}"

            def listed() -> bool:
                roles = lab.api("trainwatch-lab/api/snapshot", timeout=60)["watched"]
                return role in roles.get(str(logs), [])

            assert wait_until(listed, 60)  # the server watches it for the terminal
            snapshot = lab.api("trainwatch-lab/api/snapshot", timeout=60)
            time.sleep(3)  # a few of its ticks printed
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=60)
        assert "watching with the Jupyter server's sampler" in err, err
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert lines and all(str(logs) in line["paths"] for line in lines[-1:])
        # the server's ticks, at their times: one of them is the snapshot's
        ticks = {line["t"] for line in lines}
        assert snapshot["t"] in ticks or max(ticks) > snapshot["t"]
        assert wait_until(
            lambda: str(logs) not in lab.api("trainwatch-lab/api/snapshot")["watched"]
        )

        alone = watch(runtime, "--no-attach", "--duration", "2", str(logs))
        _, err = alone.communicate(timeout=120)
        assert "Jupyter server" not in err
        other = watch(tmp_path / "another-runtime", "--duration", "2", str(logs))
        _, err = other.communicate(timeout=120)
        assert "Jupyter server" not in err  # a server of another runtime directory: not ours


def check(runtime: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", "check", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_check_is_run_by_the_servers_guard_and_says_so(tmp_path: Path, sshfs_mount) -> None:
    """`check` asks the machine's one watcher (issue 33): the server's guard, which knows
    a share that hangs already; the same report as a check run here."""
    root, logs = tmp_path / "root", tmp_path / "logs"
    root.mkdir()
    logs.mkdir()
    share = sshfs_mount.path / "runs"
    share.mkdir()
    with jupyter_lab(root) as lab:
        runtime = lab.log_path.parent / "runtime"
        there = check(runtime, str(logs), str(share))
        assert "checked by the Jupyter server's sampler" in there.stderr, there.stderr
        here = check(runtime, "--no-attach", str(logs), str(share))
        assert "Jupyter server" not in here.stderr
        assert there.returncode == here.returncode == 1  # shared-mount: a warning
        mine, theirs = json.loads(here.stdout), json.loads(there.stdout)
        assert [p["verdict"] for p in theirs["paths"]] == [p["verdict"] for p in mine["paths"]]
        assert [p["fstype"] for p in theirs["paths"]] == [p["fstype"] for p in mine["paths"]]
        assert theirs["paths"][1]["fstype"] == "fuse.sshfs"
        assert {w["code"] for w in theirs["warnings"]} == {w["code"] for w in mine["warnings"]}
        (tmp_path / "file").write_text("x")
        missing = check(runtime, str(tmp_path / "file" / "below"))
        assert missing.returncode == 2 and "error" in missing.stderr  # refused as here


def test_a_check_the_server_refuses_is_run_here_at_once(tmp_path: Path) -> None:
    """The server refuses a check it will not run (a timeout over its 60 s, more than 64
    paths, a path of 4096 characters) with an error line: the client took that for chatter
    and waited out its whole budget (about 5 min for --timeout 90) before checking here."""
    root, logs = tmp_path / "root", tmp_path / "logs"
    root.mkdir()
    logs.mkdir()
    with jupyter_lab(root) as lab:
        runtime = lab.log_path.parent / "runtime"
        fine = check(runtime, str(logs))
        refused = check(runtime, "--timeout", "90", str(logs))
    assert "checked by the Jupyter server" in fine.stderr, fine.stderr
    assert "could not check ('timeout' must be between" in refused.stderr, refused.stderr
    assert "checking here" in refused.stderr
    assert refused.returncode == 0 and json.loads(refused.stdout)["paths"][0]["verdict"]
