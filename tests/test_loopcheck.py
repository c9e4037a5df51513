"""The server tests' slow-callback check catches a callback of ours that computes, and not one
that only waits (tests/support/loopcheck.py)."""

from __future__ import annotations

import asyncio
import time

from tests.support.loopcheck import callbacks_over, ours
from trainwatch_lab.core.redact import redact


def test_a_computing_callback_of_ours_is_caught_and_a_sleeping_one_is_not() -> None:
    loop = asyncio.new_event_loop()
    try:
        with callbacks_over(0.05) as seen:
            loop.call_soon(redact, "x " * 2_000_000)  # a second of CPU in trainwatch_lab
            loop.call_soon(time.sleep, 0.3)  # wall time, no CPU: a loaded machine, not us
            loop.call_soon(loop.stop)
            loop.run_forever()
    finally:
        loop.close()
    assert [ours(text) for _, text in seen] == [True], seen
    assert "redact" in seen[0][1]
