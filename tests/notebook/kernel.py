"""A real ipykernel driven over ZMQ with jupyter_client, keeping every IOPub message.

The kernel gets the repository on PYTHONPATH, so tests work whether or not the package is
installed. ``TRAINWATCH_TEST_KERNEL=<kernelspec>`` runs them on another kernel, e.g. one
with ipykernel 6 (thread output is routed differently there than in 7).
"""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parents[2]
KERNEL_NAME = os.environ.get("TRAINWATCH_TEST_KERNEL", "python3")


class Kernel:
    def __init__(
        self, cwd: Path, kernel_name: str = KERNEL_NAME, env: dict[str, str] | None = None
    ) -> None:
        env = dict(env if env is not None else os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        self.km = KernelManager(kernel_name=kernel_name)
        self.km.start_kernel(cwd=str(cwd), env=env)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.messages: list[dict[str, Any]] = []

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def _pull(self, timeout: float) -> dict[str, Any] | None:
        try:
            msg = self.kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return None
        msg["_received"] = time.monotonic()
        self.messages.append(msg)
        return msg

    def run(self, code: str, timeout: float = 180.0) -> str:
        """Execute and wait until the kernel is idle again for this request; returns msg_id."""
        msg_id = self.kc.execute(code)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._pull(timeout=1.0)
            if (
                msg is not None
                and msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                while True:  # skip replies to earlier requests (kernel_info at startup)
                    reply = self.kc.get_shell_msg(timeout=30)
                    if reply["parent_header"].get("msg_id") == msg_id:
                        return msg_id
        raise AssertionError(f"cell did not finish within {timeout} s: {code[:80]!r}")

    def drain(self, seconds: float) -> None:
        """Keep receiving for a while (messages sent while no cell runs)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._pull(timeout=0.1)

    def outputs(
        self,
        msg_id: str,
        types: tuple[str, ...] = (
            "display_data",
            "update_display_data",
            "stream",
            "execute_result",
            "error",
        ),
    ) -> list:
        return [
            m
            for m in self.messages
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] in types
        ]

    def text(self, msg_id: str) -> str:
        out = []
        for m in self.outputs(msg_id):
            c = m["content"]
            if m["msg_type"] == "stream":
                out.append(c["text"])
            elif m["msg_type"] == "error":
                out.append("\n".join(c["traceback"]))
            elif "data" in c:
                out.append(c["data"].get("text/plain", ""))
        return "".join(out)

    def value(self, expr: str) -> Any:
        """Evaluate ``expr`` in the kernel and return it (via JSON on stdout)."""
        msg_id = self.run(f"import json as _j; print(_j.dumps({expr}))")
        text = "".join(
            m["content"]["text"]
            for m in self.outputs(msg_id, ("stream",))
            if m["content"]["name"] == "stdout"
        )
        errors = self.outputs(msg_id, ("error",))
        assert not errors, "\n".join(errors[0]["content"]["traceback"])
        return json.loads(text)


def wire_bytes(msg: dict[str, Any]) -> int:
    """Size of a message as it travels (its JSON parts + binary buffers; no signature)."""
    parts = [msg["header"], msg["parent_header"], msg["metadata"], msg["content"]]
    size = sum(len(json.dumps(p, default=str)) for p in parts)
    return size + sum(memoryview(b).nbytes for b in msg.get("buffers", []))
