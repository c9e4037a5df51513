"""``trainwatch-lab run``: a shell's exit codes for a command that cannot start, and the
stderr lines it records being the command's own, never a neighbour's in a shared log.
Real processes and files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.mounts import wait_until

from .scenarios import CLI, ENV, history
from .test_run_signals import _ended


def test_a_missing_command_exits_127_and_a_non_executable_one_126(tmp_path: Path) -> None:
    """As a shell: 127 "not found", 126 "cannot execute", one line each (issue 35, item 12:
    both exited 2, as if the wrapper's own usage were wrong)."""
    store = tmp_path / "h.sqlite"
    plain = tmp_path / "train.sh"
    plain.write_text("echo hi\n")
    plain.chmod(0o644)
    for command, code, words in (
        (str(tmp_path / "nope.sh"), 127, "No such file or directory"),
        (str(plain), 126, "Permission denied"),
    ):
        done = subprocess.run(
            [*CLI, "run", "--store", str(store), "--", command],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=60,
        )
        assert done.returncode == code, done
        assert done.stderr == f"trainwatch-lab: {command}: {words}\n"


NEIGHBOUR = (
    "import sys, time; sys.stderr.write('B: OSError: [Errno 28] No space left on device\\n'); "
    "sys.stderr.flush(); time.sleep(120)"
)
KILLED = (
    "import os, sys; sys.stderr.write('A: step 10\\n'); sys.stderr.flush(); os.kill(os.getpid(), 9)"
)


def test_a_neighbour_s_line_in_a_shared_log_is_never_the_run_s(tmp_path: Path) -> None:
    """A SIGKILLed run and another process B writing into the same log: B's Errno 28 is
    not the run's stderr nor its cause (issue 35, item 5: ``run`` read its own stderr
    file, never asking who else wrote it, and blamed the disk)."""
    store, log = tmp_path / "h.sqlite", tmp_path / "shared.log"
    with open(log, "ab") as out:
        neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR], stderr=out)
        try:
            assert wait_until(lambda: b"Errno 28" in log.read_bytes(), timeout=60)
            run = subprocess.run(
                [*CLI, "run", "--store", str(store), "--", sys.executable, "-c", KILLED],
                stderr=out,
                env=ENV,
                timeout=60,
            )
        finally:
            neighbour.kill()
            neighbour.wait()
    assert run.returncode == 128 + signal.SIGKILL
    (end,) = _ended(store)
    assert not any("Errno 28" in line for line in end.get("stderr_tail", [])), end
    why = history(store, "why")
    assert "disk" not in why and "Errno 28" not in why, why


def test_a_run_alone_in_its_log_records_its_own_lines_only(tmp_path: Path) -> None:
    """Its own log: the lines it wrote, and none of what the file held before it started."""
    store, log = tmp_path / "h.sqlite", tmp_path / "nohup.out"
    log.write_text("B: OSError: [Errno 28] No space left on device\n")  # an earlier run's
    with open(log, "ab") as out:
        run = subprocess.run(
            [*CLI, "run", "--store", str(store), "--", sys.executable, "-c", KILLED],
            stdout=out,
            stderr=out,
            env=ENV,
            timeout=60,
            start_new_session=True,
        )
    assert run.returncode == 128 + signal.SIGKILL
    (end,) = _ended(store)
    assert end["stderr_tail"] == ["A: step 10"], end
    assert os.path.getsize(log) > 0


def test_a_command_that_is_gone_before_the_record_looks_keeps_its_lines(tmp_path: Path) -> None:
    """The record thread read the command's stderr from its /proc fd table: a command that
    wrote a line and died at once was a zombie by then (no fd table), so on a loaded machine
    its lines were lost (CI, Python 3.13). What ``run`` gives it is read before the start;
    here the thread first looks once the command is a zombie, as it did then."""
    from trainwatch_lab.cli.run_record import RunRecord
    from trainwatch_lab.core.record.ended import stderr_facts

    store, log = tmp_path / "h.sqlite", tmp_path / "nohup.out"
    log.write_text("B: an earlier run's line\n")
    with open(log, "ab") as out:
        facts = stderr_facts(out.fileno())  # as run reads its own stderr before the start
        child = subprocess.Popen([sys.executable, "-c", KILLED], stderr=out)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped
        record = RunRecord(str(store), child.pid, [sys.executable, "-c", "..."], facts)
        record.start()
        assert record.seen.wait(60)
        record.finish(child.wait())
        record.join(60)
    (end,) = _ended(store)
    assert end["stderr_tail"] == ["A: step 10"], end


def test_the_command_starts_before_the_history_answers(tmp_path: Path) -> None:
    """Another writer holds the history locked: the command starts at once, and the run is
    recorded once the lock goes (its release waits for the command's first act). Before,
    the wrapper waited on the lock before starting the command, gave up after the busy
    timeout and ran it unrecorded (issue 35, item 8: recording delayed the command)."""
    import sqlite3

    from trainwatch_lab.core.record import Store

    store, marker = tmp_path / "h.sqlite", tmp_path / "started"
    Store(str(store), role="t").close()
    holder = sqlite3.connect(str(store), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        run = subprocess.Popen(
            [*CLI, "run", "--store", str(store), "--", "touch", str(marker)], env=ENV
        )
        assert wait_until(marker.exists, timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run.wait(timeout=60) == 0
    (end,) = _ended(store)
    assert end["exit"] == {"code": 0} and end["name"] == "touch"
