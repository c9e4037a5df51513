"""``trainwatch-lab run`` in a terminal: Ctrl-C reaches the script once (the terminal
signals the whole foreground group; the wrapper must not send it again), and SIGTERM to
the wrapper is passed on. A real pseudo-terminal, real processes and signals."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.support.mounts import wait_until

ROOT = Path(__file__).resolve().parents[2]

# counts every delivery of SIGINT at the C level (the wakeup fd gets a byte per signal, where
# Python's handlers would fold two into one), logs each, and exits on SIGTERM
COUNTER = """
import os, select, signal, sys
log = open(sys.argv[1], "a", buffering=1)
r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w, warn_on_full_buffer=False)
signal.signal(signal.SIGINT, lambda *a: None)
signal.signal(signal.SIGTERM, lambda *a: None)
log.write("ready\\n")
while True:
    select.select([r], [], [], 60)
    for signum in os.read(r, 64):
        log.write(f"{signal.Signals(signum).name}\\n")
        if signum == signal.SIGTERM:
            sys.exit(0)
"""


def _own_terminal(slave: int) -> None:  # (runs in the child before exec)
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)


def test_ctrl_c_in_a_terminal_reaches_the_script_once(tmp_path: Path) -> None:
    master, slave = os.openpty()
    log = tmp_path / "signals.log"
    wrapper = subprocess.Popen(
        [
            *(sys.executable, "-m", "trainwatch_lab", "run", "--store", str(tmp_path / "h.sqlite")),
            *("--", sys.executable, "-c", COUNTER, str(log)),
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=lambda: _own_terminal(slave),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(slave)
    lines = lambda: log.read_text().split() if log.exists() else []  # noqa: E731
    try:
        assert wait_until(lambda: "ready" in lines(), timeout=60)
        # the wrapper puts its handlers in after it started the script
        assert wait_until(lambda: _handled(wrapper.pid), timeout=60)
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals its foreground group
        assert wait_until(lambda: "SIGINT" in lines(), timeout=60)
        wrapper.send_signal(signal.SIGTERM)  # after any SIGINT the wrapper passes on
        assert wrapper.wait(timeout=60) == 0
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
        os.close(master)
    assert lines() == ["ready", "SIGINT", "SIGTERM"]


def _handled(pid: int) -> bool:
    """Whether ``pid`` catches SIGTERM yet (SigCgt in /proc: its handlers are in)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


# logs every signal it gets (as COUNTER does) and exits 0 on SIGTERM
LOGGER = COUNTER.replace(
    "signal.signal(signal.SIGINT, lambda *a: None)\n",
    "for s in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,"
    " signal.SIGALRM, signal.SIGWINCH, signal.SIGCONT, signal.SIGPWR):\n"
    "    signal.signal(s, lambda *a: None)\n",
)
SENT = ("SIGUSR1", "SIGUSR2", "SIGALRM", "SIGHUP", "SIGQUIT", "SIGWINCH", "SIGPWR", "SIGINT")


def _run(store: Path, *cmd: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "trainwatch_lab", "run", "--store", str(store), "--", *cmd],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        **kw,  # type: ignore[arg-type]
    )


def _ended(store: Path) -> list[dict[str, object]]:
    from trainwatch_lab.core.record import Store

    s = Store(str(store), readonly=True)
    try:
        return [e.data for e in s.events(0, 1e12, kinds=("run-ended",))]
    finally:
        s.close()


def test_every_signal_a_job_gets_goes_to_the_command_and_the_end_is_recorded(
    tmp_path: Path,
) -> None:
    """Slurm's ``--signal=USR1@90`` and the rest: none ends the wrapper (issue 35, item 2:
    SIGUSR1 killed it with rc 138, the script ran on and its end was never recorded)."""
    log, store = tmp_path / "signals.log", tmp_path / "h.sqlite"
    wrapper = _run(store, sys.executable, "-c", LOGGER, str(log), start_new_session=True)
    lines = lambda: log.read_text().split() if log.exists() else []  # noqa: E731
    try:
        assert wait_until(lambda: "ready" in lines(), timeout=60)
        for name in SENT:
            wrapper.send_signal(getattr(signal, name))
            assert wait_until(lambda n=name: n in lines(), timeout=60), (name, lines())
            assert wrapper.poll() is None, (name, wrapper.returncode)
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=60) == 0
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert lines() == ["ready", *SENT, "SIGTERM"]
    (end,) = _ended(store)
    assert end["exit"] == {"code": 0}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _first_children(pid: int, timeout: float = 60.0) -> list[int]:
    """``pid``'s children as soon as it has one (a busy loop: the fork is just done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := _children(pid):
            return found
    raise AssertionError(f"{pid} started no child in {timeout} s")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_sigterm_as_the_command_starts_is_passed_on_never_orphaning_it(tmp_path: Path) -> None:
    """SIGTERM the moment the wrapper forked its command, ten times over: each time the
    command gets it and the wrapper reports it (143); none is left running without its
    wrapper (issue 35, item 3: 8 of 10 wrappers died and left the command orphaned)."""
    store = tmp_path / "h.sqlite"
    orphans: list[int] = []
    codes = []
    for _ in range(10):
        wrapper = _run(store, "sleep", "30")
        try:
            child = _first_children(wrapper.pid)
            wrapper.send_signal(signal.SIGTERM)  # at once: within a few ms of the fork
            codes.append(wrapper.wait(timeout=60))
        finally:
            if wrapper.poll() is None:
                wrapper.kill()
                wrapper.wait()
        left = [pid for pid in child if _running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        orphans += left
    assert orphans == [] and codes == [128 + signal.SIGTERM] * 10, (orphans, codes)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_sigtstp_stops_the_command_and_the_wrapper_and_sigcont_wakes_both(tmp_path: Path) -> None:
    """A batch system's suspend (TSTP to the wrapper, then CONT): the command stops with it
    and goes on after; before, the wrapper stopped alone and the command ran on."""
    store = tmp_path / "h.sqlite"
    # a process group of its own in our session: not orphaned, so stop signals stop it
    # (Popen's process_group came with Python 3.11; setpgid in the child is the same on 3.10)
    own_group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    wrapper = _run(store, "sleep", "60", **own_group)
    try:
        (child,) = _first_children(wrapper.pid)
        assert wait_until(lambda: _handled(wrapper.pid), timeout=60)
        wrapper.send_signal(signal.SIGTSTP)
        assert wait_until(lambda: _state(child) == "T" and _state(wrapper.pid) == "T", 60)
        wrapper.send_signal(signal.SIGCONT)
        assert wait_until(lambda: _state(child) != "T" and _state(wrapper.pid) != "T", 60)
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
    (end,) = _ended(store)
    assert end["exit"] == {"code": None, "signal": "SIGTERM"}


def test_what_nohup_ignores_stays_ignored_for_the_command(tmp_path: Path) -> None:
    """``nohup trainwatch-lab run -- python train.py &``: the command inherits SIGHUP (and a
    non-interactive shell's SIGINT/SIGQUIT for ``cmd &``) ignored, as it would without the
    wrapper, and a hangup at logout ends neither (the wrapper's handlers, installed before
    the command starts, gave it the default action back and passed the hangup on)."""
    log, store = tmp_path / "dispositions.log", tmp_path / "h.sqlite"
    report = (
        "import signal, sys, time\n"
        "log = open(sys.argv[1], 'a', buffering=1)\n"
        "for name in ('SIGHUP', 'SIGINT', 'SIGQUIT'):\n"
        "    ignored = signal.getsignal(getattr(signal, name)) is signal.SIG_IGN\n"
        "    log.write(f'{name}={ignored}\\n')\n"
        "log.write('ready\\n')\n"
        "time.sleep(3600)\n"
    )
    ignore = lambda: [signal.signal(s, signal.SIG_IGN) for s in IGNORED]  # noqa: E731
    wrapper = _run(
        store, sys.executable, "-c", report, str(log), start_new_session=True, preexec_fn=ignore
    )
    lines = lambda: log.read_text().split() if log.exists() else []  # noqa: E731
    try:
        assert wait_until(lambda: "ready" in lines(), timeout=60), lines()
        assert lines()[:3] == ["SIGHUP=True", "SIGINT=True", "SIGQUIT=True"]
        (command,) = _children(wrapper.pid)
        wrapper.send_signal(signal.SIGHUP)  # the logout
        wrapper.send_signal(signal.SIGUSR1)  # a signal nobody ignored still goes through...
        assert wait_until(lambda: not _running(command), timeout=60)
        assert wrapper.wait(timeout=60) == 128 + signal.SIGUSR1
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    # ...and ended the command by its default action, not the hangup
    (end,) = _ended(store)
    assert end["exit"] == {"code": None, "signal": "SIGUSR1"}, end


def test_a_command_a_real_time_signal_ends_is_recorded_by_its_number(tmp_path: Path) -> None:
    """Signals 35-63 have no name in ``signal.Signals`` (it raises): the record thread died
    there, and the run's end was never written."""
    store = tmp_path / "h.sqlite"
    rt = signal.SIGRTMIN + 6
    wrapper = _run(store, sys.executable, "-c", f"import os; os.kill(os.getpid(), {rt})")
    assert wrapper.wait(timeout=60) == 128 + rt
    (end,) = _ended(store)
    assert end["exit"] == {"code": None, "signal": f"signal {rt}"}, end


IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
