"""The ``run`` wrapper's signal handling: every signal a job controller or a batch system
sends (Slurm's ``--signal=USR1@90``, ``scancel``'s TERM, a terminal's HUP) goes on to the
command, and none of them ends the wrapper, which must live to record the command's end.

The handlers go in before the command starts: a signal that comes while it is being
started is held and passed on once its pid is known (a SIGTERM 1 ms after the wrapper
forked must not kill the wrapper and orphan the command). Signals the terminal already sent
to the whole foreground group (Ctrl-C, Ctrl-\\, Ctrl-Z, a resize, a hangup) are not sent a
second time when the command is in that group: a second SIGINT would abort a script's
``except KeyboardInterrupt:`` emergency save. SIGTSTP stops the wrapper too, after the
command (as a shell's job stops as a whole); SIGCONT wakes both.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

# what a wrapper passes on: the signals others send a job (not our own faults, SIGCHLD of
# our own child, SIGPIPE of our own writes, or SIGTTIN/SIGTTOU of our own terminal reads)
FORWARDED_NAMES = (
    *("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH"),
    *("SIGCONT", "SIGTSTP", "SIGPWR", "SIGXCPU", "SIGVTALRM", "SIGPROF", "SIGURG"),
)
FORWARDED = tuple(getattr(signal, n) for n in FORWARDED_NAMES if hasattr(signal, n))
# what a terminal sends its whole foreground process group by itself
TERMINAL_SIGNALS = frozenset(
    {signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP, signal.SIGWINCH}
)


def in_foreground(pid: int) -> bool:
    """Whether ``pid`` is in the foreground process group of our controlling terminal."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgid(pid)
        except OSError:  # no controlling terminal, or the child is gone
            continue
    return False


class Forwarder:
    """Installed before the command starts; ``started`` names the command (signals caught
    before that are passed on then); ``restore`` puts the previous handlers back."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.previous: dict[int, Any] = {}

    def install(self) -> Forwarder:
        """Every forwarded signal but those already ignored: what ``nohup`` (SIGHUP) or a
        shell's ``cmd &`` (SIGINT, SIGQUIT) ignores, the command inherits ignored, as it
        would without us; a handler of ours would give it the default action back at exec
        and hand the hangup at logout on to it."""
        for signum in FORWARDED:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue
            self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def started(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        while self.pending:
            self._pass_on(child, self.pending.pop(0))

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.child is None:  # (handlers run on the main thread: no race with started)
            self.pending.append(signum)
        else:
            self._pass_on(self.child, signum)

    def _pass_on(self, child: subprocess.Popen[bytes], signum: int) -> None:
        if not (signum in TERMINAL_SIGNALS and in_foreground(child.pid)):
            child.send_signal(signum)  # (a no-op once the child was waited for)
        if signum == signal.SIGTSTP:
            self._stop_self()

    def _stop_self(self) -> None:
        """Stop as SIGTSTP's default would (the shell sees the job stopped), until SIGCONT."""
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGTSTP)
        finally:
            signal.signal(signal.SIGTSTP, self._handle)
