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
