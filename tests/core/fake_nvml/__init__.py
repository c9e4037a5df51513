"""A fake ``libnvidia-ml.so.1`` built with gcc at test time, and helpers to drive it.

Why: this machine (and CI) has no GPU, but the real ``pynvml`` bindings must run end to end.
The library (fake_nvml.c) answers from a script file that tests rewrite mid-run; the GPU code
runs in a subprocess whose ``LD_LIBRARY_PATH`` points at the fake, because pynvml loads the
library by soname with ``CDLL("libnvidia-ml.so.1")`` and the loader reads that path at start.

Fixtures (import them into a test module): ``fake_nvml_lib`` (session: the built library's
directory) and ``fake_nvml`` (a fresh :class:`FakeNvml` with its own script file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import need_tool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SOURCE = HERE / "fake_nvml.c"
LIBNAME = "libnvidia-ml.so.1"
GIB = 1024**3


def build(dest: Path, *defines: str) -> Path:
    """Compile the fake into ``dest/libnvidia-ml.so.1`` (``defines``: ``-D`` names); returns
    ``dest``."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("gcc is needed to build the fake NVML library")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / LIBNAME
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Werror",
            f"-Wl,-soname,{LIBNAME}",
            *(f"-D{name}" for name in defines),
            "-o",
            str(out),
            str(SOURCE),
            "-lpthread",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return dest


def gpu(i: int, **fields: Any) -> dict[str, Any]:
    """A device entry for :meth:`FakeNvml.write` with realistic defaults."""
    base: dict[str, Any] = {
        "uuid": f"GPU-{0xFA4E0000 + i:08x}-1111-2222-3333-44444444444{i % 10}",
        "name": f"Fake H100 {i}",
        "util": 50,
        "mem_util": 20,
        "mem_total": 80 * GIB,
        "mem_used": 10 * GIB,
        "power_mw": 300_000,
        "power_limit_mw": 700_000,
        "temp": 55,
        "pcie_tx_kbs": 1000,
        "pcie_rx_kbs": 2000,
        "reasons": 0,
    }
    base.update(fields)
    return base


class FakeNvml:
    """The script of one test: devices and return codes, rewritten atomically."""

    def __init__(self, libdir: Path, script: Path) -> None:
        self.libdir = libdir
        self.script = script
        self._version = 0

    def write(self, gpus: list[Mapping[str, Any]], **top: Any) -> None:
        lines = [f"{k}={v}" for k, v in top.items()]
        for i, dev in enumerate(gpus):
            for key, value in dev.items():
                if key == "procs":
                    value = ",".join(f"{pid}:{used}" for pid, used in dict(value).items())
                elif key == "mig_procs":  # {instance: {pid: used}}
                    value = ",".join(
                        f"{k}/{pid}:{used}"
                        for k, procs in dict(value).items()
                        for pid, used in procs.items()
                    )
                lines.append(f"gpu{i}.{key}={value}")
        self._version += 1
        tmp = self.script.with_name(f"{self.script.name}.{self._version}.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.script)  # new inode: the library sees the change at once

    def env(self, extra: Mapping[str, str] | None = None, library: bool = True) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env["FAKE_NVML_SCRIPT"] = str(self.script)
        env["LD_LIBRARY_PATH"] = str(self.libdir) if library else str(self.script.parent)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.update(extra or {})
        return env


class Driver:
    """A subprocess that owns one GpuSource and ticks it on request (see driver.py)."""

    def __init__(self, env: Mapping[str, str], pid: int | None = None, **defaults: Any) -> None:
        args = [sys.executable, "-m", "tests.core.fake_nvml.driver", json.dumps(defaults)]
        if pid is not None:
            args.append(str(pid))
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr = ""  # what the driver printed to stderr, once closed

    def _ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"driver died: {err}")
        return json.loads(line)

    def tick(self) -> dict[str, Any]:
        return self._ask("tick")

    def close(self) -> dict[str, Any]:
        try:
            return self._ask("close")
        finally:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.stderr = self.proc.stderr.read() if self.proc.stderr else ""
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tool("gcc")  # skip on a laptop without a compiler, fail under CI
    key = str(tmp_path_factory.getbasetemp())
    if key not in _BUILT:  # one build per session even when several modules import this
        _BUILT[key] = build(tmp_path_factory.mktemp("fake_nvml"))
    return _BUILT[key]


@pytest.fixture
def fake_nvml(fake_nvml_lib: Path, tmp_path: Path) -> Iterator[FakeNvml]:
    script_dir = tmp_path / "nvml"
    script_dir.mkdir()
    yield FakeNvml(fake_nvml_lib, script_dir / "script.txt")
