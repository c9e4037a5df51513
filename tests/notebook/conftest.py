"""A real IPython shell with the extension loaded, torn down (sampler stopped) after each test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ipshell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


@pytest.fixture
def shell(ipshell: Any) -> Iterator[Any]:
    ipshell.run_line_magic("load_ext", "trainwatch_lab")
    try:
        yield ipshell
    finally:
        ipshell.run_line_magic("unload_ext", "trainwatch_lab")
        for key in [k for k in ipshell.user_ns if not k.startswith("_")]:
            if key not in ("In", "Out", "exit", "quit", "get_ipython"):
                ipshell.user_ns.pop(key, None)


def sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trainwatch-sampler" and t.is_alive()]


def wait_for(cond: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll until ``cond()`` is truthy (a generous ceiling, not a performance assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
