"""A real ipykernel driven over ZMQ with jupyter_client, keeping every IOPub message.

The kernel gets the repository on PYTHONPATH, so tests work whether or not the package is
installed. Two flavours (``FLAVOURS``): ``ipykernel7``, the installed kernel (its spec name
can be overridden with ``TRAINWATCH_TEST_KERNEL``), and ``ipykernel6``, a kernel from a
virtual environment that sees our site-packages but holds ipykernel 6 (thread output is
routed differently there than in 7). That environment is built once per machine, under
/tmp keyed by Python and ipykernel range, by ``ipykernel6_kernel_dir``.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parents[2]
KERNEL_NAME = os.environ.get("TRAINWATCH_TEST_KERNEL", "python3")
FLAVOURS = ("ipykernel7", "ipykernel6")
IPYKERNEL6 = "ipykernel>=6,<7"
IPYKERNEL6_NAME = "trainwatch-ipykernel6"
KERNEL_CACHE = Path(os.environ.get("TRAINWATCH_KERNEL_CACHE", "/tmp/trainwatch-test-kernels"))


class KernelSetupError(RuntimeError):
    """The ipykernel 6 environment could not be built (no package index, no venv)."""


def _run(cmd: list[str], timeout: float) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise KernelSetupError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {tail[0]}")


def ipykernel6_kernel_dir(cache: Path = KERNEL_CACHE) -> Path:
    """A kernels directory holding ``IPYKERNEL6_NAME``: a venv with ``--system-site-packages``
    (so trainwatch's dependencies come from here) plus ipykernel 6 installed into it, which
    shadows the system's ipykernel 7. Built once; a lock keeps parallel sessions from
    building it twice, a marker file from using a half-built one."""
    major, minor = sys.version_info[:2]
    venv = cache / f"ipykernel6-py{major}.{minor}"
    kernels = venv / "share" / "jupyter" / "kernels"
    ready = venv / ".trainwatch-ready"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return kernels
        shutil.rmtree(venv, ignore_errors=True)
        python = str(venv / "bin" / "python")
        try:
            _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], 300)
            _run(
                [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", IPYKERNEL6],
                600,
            )
            _run(
                [
                    *(python, "-m", "ipykernel", "install", "--prefix", str(venv)),
                    *("--name", IPYKERNEL6_NAME, "--display-name", "Python 3 (ipykernel 6)"),
                ],
                120,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KernelSetupError(f"cannot build the ipykernel 6 environment: {exc}") from exc
        ready.write_text(IPYKERNEL6 + "\n")
        return kernels


def kernel_spec_for(flavour: str, kernels_dir: Path | None = None) -> tuple[str, Any]:
    """(kernel name, KernelSpecManager or None for the default one) of a flavour."""
    if flavour == "ipykernel7":
        return KERNEL_NAME, None
    if flavour == "ipykernel6":
        assert kernels_dir is not None, "build it first: ipykernel6_kernel_dir()"
        return IPYKERNEL6_NAME, KernelSpecManager(kernel_dirs=[str(kernels_dir)])
    raise ValueError(f"unknown kernel flavour {flavour!r}; one of {FLAVOURS}")


class Kernel:
    def __init__(
        self,
        cwd: Path,
        kernel_name: str = KERNEL_NAME,
        env: dict[str, str] | None = None,
        spec_manager: KernelSpecManager | None = None,
    ) -> None:
        env = dict(env if env is not None else os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        extra = {"kernel_spec_manager": spec_manager} if spec_manager is not None else {}
        self.km = KernelManager(kernel_name=kernel_name, **extra)
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
